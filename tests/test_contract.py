"""The lock, the result's provenance and the error contract on every hostile-input class of
the second audit: each case below failed (traceback, exit 3, silent acceptance or a lost
file) before its fix. Bad input ends as one ``error: FIELD: got VALUE; allowed: ...`` line
and exit 2 before any work; outputs never delete or overwrite a file no run wrote.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

import libra_des
from libra_des.cli import main
from libra_des.errors import InputError
from tests.test_hostile_new import SMALL, TINY  # 16 GPUs, one step, two layers

ROOT = Path(__file__).resolve().parent.parent
LINE = re.compile(r"error: \S.*: got .*; allowed: .+\n")


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run the CLI in-process; assert exit 2 and one ``FIELD: got VALUE; allowed:`` line."""
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's usage errors leave through SystemExit
        code = exc.code  # type: ignore[assignment]
    assert code == 2, argv
    err = capsys.readouterr().err
    assert LINE.fullmatch(err), err
    return err


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sc") / "tiny.yaml"
    path.write_text(json.dumps(TINY))
    return path


# ----------------------------------------------------------------------------- the lock


def pins() -> dict[str, str]:
    out = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep and version and not re.search(r"[<>=!~,; ]", version), line
            out[canonical(name)] = version
    return out


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(text: str) -> str:
    return canonical(re.split(r"[\s<>=!~;\[(]", text.strip(), maxsplit=1)[0])


def test_constraints_pin_every_dependency_of_every_extra() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        wanted += extra
    locked = pins()
    missing = sorted({requirement_name(r) for r in wanted} - set(locked))
    assert not missing, f"not pinned in constraints.txt: {missing}"
    assert locked["torch"] == "2.13.0"  # the local CPU wheel, never a CUDA build


def test_installed_closure_is_locked() -> None:
    """Every distribution libra-des needs here (all its extras), transitively, has a pin, and
    the pinned version is the one installed (make installs with -c constraints.txt)."""
    from packaging.requirements import Requirement

    locked, seen = pins(), set()
    extras = ("", "dev", "calibrate", "figs", "tables", "ray")
    todo = ["libra-des"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue  # an optional dependency not installed here (ray)
        for text in requires:
            req = Requirement(text)
            ours = extras if name == "libra-des" else ("",)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in ours):
                todo.append(canonical(req.name))
    seen.discard("libra-des")
    installed = {n for n in seen if has_distribution(n)}
    assert sorted(installed - set(locked)) == []
    for name in sorted(installed):
        assert metadata.version(name).split("+")[0] == locked[name], name


def has_distribution(name: str) -> bool:
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        return False
    return True


# ----------------------------------------------------------------------------- provenance


def test_result_records_versions_and_run_json_the_wall_clock(
    scenario: Path, tmp_path: Path
) -> None:
    assert main(["run", str(scenario), *SMALL, "--out", str(tmp_path), "--json"]) == 0
    result = json.loads((tmp_path / "result.json").read_text())
    versions = result["versions"]
    assert set(versions) == {"libra-des", "python", "numpy", "scipy", "simpy", "numba",
                             "llvmlite", "networkx", "pydantic"}
    assert versions["numpy"] == metadata.version("numpy")
    assert versions["python"] == ".".join(map(str, sys.version_info[:3]))
    assert "wall_s" not in result
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["wall_s"] > 0 and run["files"] == ["result.json"] and run["host"]["cpus"] >= 1


@pytest.mark.slow
def test_quickstart_result_is_byte_identical_in_two_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    quickstart = str(ROOT / "scenarios" / "quickstart.yaml")
    texts = []
    for folder in ("a", "b/c"):
        where = tmp_path / folder
        where.mkdir(parents=True)
        monkeypatch.chdir(where)
        assert main(["run", quickstart, "--out", "out", "--json"]) == 0
        texts.append((where / "out" / "result.json").read_bytes())
    assert texts[0] == texts[1]


def test_dir_lists_the_api() -> None:
    names = dir(libra_des)
    for name in ("simulate", "load_scenario", "step_plan", "cost", "Result", "InputError",
                 "load_sweep"):
        assert name in names and name in libra_des.__all__


# ----------------------------------------------------------------------------- usage errors


def test_usage_errors_use_the_one_line_form(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, scenario: Path
) -> None:
    assert "--bytes: got 'lots'" in one_line_error(capsys, ["cost", "--bytes", "lots"])
    assert "scenario: got nothing" in one_line_error(capsys, ["run"])
    assert "--op: got nothing" in one_line_error(capsys, ["cost", "--op"])
    dangling = tmp_path / "gone"
    dangling.symlink_to(tmp_path / "missing" / "x")
    err = one_line_error(capsys, ["run", str(scenario), "--out", str(dangling)])
    assert "symbolic link" in err


def test_unknown_keys_say_did_you_mean(
    capsys: pytest.CaptureFixture[str], scenario: Path
) -> None:
    err = one_line_error(capsys, ["run", str(scenario), "--set", "parallelism.tpp=1"])
    assert "did you mean 'tp'" in err
    err = one_line_error(capsys, ["run", str(scenario), "--set", "workload.packed_lenght=8"])
    assert "did you mean 'packed_length'" in err
    err = one_line_error(capsys, ["run", str(scenario), "--set", "topology_params.gpus_per_nod=8"])
    assert "did you mean 'gpus_per_node'" in err


# ----------------------------------------------------------------------------- API


def test_load_sweep_checks_the_folder_before_pandas(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if the tables extra were absent
    with pytest.raises(InputError, match="load_sweep"):
        libra_des.load_sweep(tmp_path / "missing")


def test_simulate_revalidates_a_model_copy(scenario: Path) -> None:
    sc = libra_des.load_scenario(scenario)
    assert libra_des.load_scenario(sc) == sc
    bad = sc.model_copy(update={"parallelism": sc.parallelism.model_copy(update={"gbs": 3})})
    with pytest.raises(InputError, match="gbs"):
        libra_des.simulate(bad)
    with pytest.raises(InputError, match="seed"):
        libra_des.simulate(sc.model_copy(update={"seed": 2**70}))


# ----------------------------------------------------------------------------- silent input

NCCL = (
    "# nThread 1 nGpus {ngpus} minBytes 8 maxBytes 2097152 step: 2(factor) warmup iters: 5\n"
    "#\n# Using devices\n{ranks}#\n"
    "# size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
    "# (B) (elements) (us) (GB/s) (GB/s) (us) (GB/s) (GB/s)\n"
    " 1048576 262144 float sum -1 10.00 104.86 52.43 0 10.00 104.86 52.43 0\n"
    " 2097152 524288 float sum -1 15.00 139.81 69.91 0 15.00 139.81 69.91 0\n"
)
RANK = "#  Rank  {r} Group  0 Pid  12{r} on  host1 device  {r} [0x07] NVIDIA H100 80GB HBM3\n"


@pytest.mark.parametrize(("ngpus", "ranks", "group"), [
    (2, [0], 2),        # a header cut to one Rank line: nGpus says two GPUs
    (2, [0, 0, 1, 1], 2),  # every Rank line pasted twice
    (1, [0], None),     # a one-GPU collective: nothing to fit
])
def test_nccl_tests_headers_import_or_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, ngpus: int, ranks: list[int],
    group: int | None,
) -> None:
    log = tmp_path / "all_reduce_perf.txt"
    log.write_text(NCCL.format(ngpus=ngpus, ranks="".join(RANK.format(r=r) for r in ranks)))
    argv = ["profile", "import", "--format", "nccl-tests", str(log), "--out",
            str(tmp_path / "p.json"), "--device", "h100-sxm", "--json"]
    if group is None:
        assert "a collective over 2 or more GPUs" in one_line_error(capsys, argv)
        return
    assert main(argv) == 0, capsys.readouterr().err
    samples = json.loads((tmp_path / "p.json").read_text())["samples"]
    assert {s["group"] for s in samples} == {group}


@pytest.mark.parametrize(("override", "field"), [
    ("parallelism.tp=3", "parallelism.tp"),
    ("topology_params.gpus_per_node=3", "gpus_per_node"),
    ("workload.lengths={kind: constant, value: 600000}", "workload.lengths.value"),
])
def test_settings_the_model_would_ignore_are_refused(
    capsys: pytest.CaptureFixture[str], scenario: Path, override: str, field: str
) -> None:
    err = one_line_error(capsys, ["run", str(scenario), "--set", override])
    assert err.startswith(f"error: {field}") or field in err


def test_binary_yaml_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "bin.yaml"
    text = json.dumps({k: v for k, v in TINY.items() if k != "name"})
    path.write_text(text[:-1] + ', "name": !!binary aGVsbG8=}')
    assert "!!binary" in one_line_error(capsys, ["run", str(path)])


@pytest.mark.parametrize("text", ["[1e308, 4096]", "[4096, 16777217]"])
def test_length_files_are_bounded(
    capsys: pytest.CaptureFixture[str], scenario: Path, tmp_path: Path, text: str
) -> None:
    lengths = tmp_path / "lengths.json"
    lengths.write_text(text)
    law = f"workload.lengths={{kind: empirical, path: {lengths}}}"
    err = one_line_error(capsys, ["run", str(scenario), *SMALL, "--out", str(tmp_path / "o"),
                                  "--set", law])
    assert "16,777,216 tokens" in err
    assert not (tmp_path / "o" / "result.json").exists()


@pytest.mark.parametrize(("flags", "field"), [
    (["--policy", ""], "--policy"), (["--seed", str(2**63)], "--seed"),
])
def test_plan_flags_are_checked(
    capsys: pytest.CaptureFixture[str], flags: list[str], field: str
) -> None:
    err = one_line_error(capsys, ["plan", "--workload", "longctx-256k", *flags])
    assert err.startswith(f"error: {field}:")


def test_report_refuses_a_metric_that_is_not_a_number(
    capsys: pytest.CaptureFixture[str], scenario: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    assert main(["run", str(scenario), *SMALL, "--out", str(run), "--json"]) == 0
    capsys.readouterr()
    data: dict[str, Any] = json.loads((run / "result.json").read_text())
    (run / "result.json").write_text(json.dumps(data | {"mfu": "high"}))
    assert "a number for mfu" in one_line_error(capsys, ["report", str(run)])


# ----------------------------------------------------------------------------- outputs


def test_run_never_deletes_or_overwrites_a_file_it_did_not_write(
    capsys: pytest.CaptureFixture[str], scenario: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "trace.json").write_text("mine")
    argv = ["run", str(scenario), *SMALL, "--out", "."]
    # A folder holding the user's files and no manifest is not the tool's to fill.
    assert "a folder the tool created" in one_line_error(capsys, [*argv, "--trace"])
    assert "a folder the tool created" in one_line_error(capsys, argv)
    assert not (tmp_path / "result.json").exists()
    assert (tmp_path / "trace.json").read_text() == "mine"
    # A run's own artefacts are replaced and its stale trace removed on a rerun.
    own = tmp_path / "own"
    assert main(["run", str(scenario), *SMALL, "--out", str(own), "--trace", "--json"]) == 0
    assert main(["run", str(scenario), *SMALL, "--out", str(own), "--json"]) == 0
    assert not (own / "trace.json").exists()
    # A file of the run's that the user edited since is refused, never replaced.
    (own / "result.json").write_text((own / "result.json").read_text() + " ")
    assert "result.json" in one_line_error(capsys, ["run", str(scenario), *SMALL, "--out",
                                                    str(own), "--json"])


def test_report_never_overwrites_a_sweep_table(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    sweep = tmp_path / "sw"
    sweep.mkdir()
    (sweep / "sweep.csv").write_text("id,mfu\n")
    err = one_line_error(capsys, ["report", str(sweep), "--out", str(sweep / "sweep.csv")])
    assert "sweep.csv" in err
    assert (sweep / "sweep.csv").read_text() == "id,mfu\n"


def test_sigterm_is_handled_like_ctrl_c() -> None:
    from libra_des.runs.sweep_safety import sigterm_as_interrupt

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), sigterm_as_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
        signal.sigtimedwait([], 1)  # let the handler run
    assert signal.getsignal(signal.SIGTERM) is before


def test_attention_rows_must_match_the_header(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    table = tmp_path / "attention.psv"
    table.write_text("gpu_type|tp|cp|hqo|hkv|d|total_len|batch|total_latency(ms)\n"
                     "H100|1|1|32|8|128|4096|[4096]|1.5\n"
                     "H100|1|1|32|8|128|8192|[8192]|1.0|nan\n")  # a pasted NaN cell
    argv = ["profile", "import", "--format", "attention-psv", str(table), "--out",
            str(tmp_path / "p.json"), "--device", "h100-sxm"]
    assert "a complete row of 9 columns" in one_line_error(capsys, argv)
    assert not (tmp_path / "p.json").exists()
