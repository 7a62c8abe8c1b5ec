"""Hostile input to the features merged after the hostile-input audit: ``report``, ``figs``,
``run --table``, ``quickstart --out``, ``plan --tap``, the grouped-GEMM importer and the
Python API. Each case ends as exit 2 with one ``error:`` line before any work (or, for the
API, one :class:`InputError`); nothing is written. One 16-GPU, 2-layer run is simulated
for the whole module; every other case fails before simulating.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

import libra_des
from libra_des.cli import main
from libra_des.errors import InputError

#: 16 GPUs, one step (with ``SMALL``: two layers), in well under a second.
TINY = {
    "name": "tiny", "kind": "training", "steps": 1, "topology": "h200-roce-railopt",
    "model": "qwen3-30b-a3b", "workload": "longctx-256k",
    "parallelism": {"dp": 2, "pp": 1, "cp": 8, "tp": 1, "gbs": 2},
    "balancer": {"policy": "libra", "pool_size": 2}, "memory": {"recompute": "full"},
}
SMALL = ["--set", "model.layers=2"]
GROUPED_HEADER = "device,dtype,layout,groups,rows,n,k,tflops,time_us\n"


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run the CLI in-process; assert exit 2 and a single ``error:`` line; return it."""
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error:"), err
    return err


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sc") / "tiny.yaml"
    path.write_text(json.dumps(TINY))  # JSON is YAML
    return path


@pytest.fixture(scope="module")
def result(scenario: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("run")
    assert main(["run", str(scenario), *SMALL, "--out", str(out), "--json"]) == 0
    data: dict[str, Any] = json.loads((out / "result.json").read_text())
    return data


def run_folder(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "r"
    folder.mkdir()
    (folder / "result.json").write_text(text)
    return folder


def sweep_folder(tmp_path: Path, result: dict[str, Any], index: Any) -> Path:
    folder = tmp_path / "sw"
    (folder / "points").mkdir(parents=True)
    (folder / "points" / "a.json").write_text(json.dumps(result))
    (folder / "sweep.json").write_text(json.dumps(index))
    return folder


GOOD_INDEX = {"axes": [{"keys": ["balancer.policy"], "values": [["libra"]]}],
              "points": [{"id": "a", "file": "points/a.json",
                          "overrides": {"balancer.policy": "libra"}}]}


# ----------------------------------------------------------------------------- report


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda t, d: t.replace('"mfu": ', '"mfu": NaN, "x": ', 1), "finite"),
        (lambda t, d: json.dumps({**d, "mfu": 5.0}), "plausible"),
        (lambda t, d: json.dumps({**d, "bubble_fraction": -3}), "plausible"),
        (lambda t, d: "{" + '"mfu": 1, ' + t[1:], "each key once"),
        (lambda t, d: "[" * 5000 + "]" * 5000, "nesting"),
        (lambda t, d: t[:200], "well-formed"),
        (lambda t, d: json.dumps({**d, "scenario": {**d["scenario"], "profile": {"a": 1}}}),
         "scenario.profile of type str"),
        (lambda t, d: json.dumps({**d, "comm_tiers": [1, 2]}), "comm_tiers of type dict"),
    ],
)
def test_report_refuses_a_hostile_result(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, result: dict[str, Any], edit: Any,
    needle: str,
) -> None:
    folder = run_folder(tmp_path, edit(json.dumps(result), result))
    err = one_line_error(capsys, ["report", str(folder), "--out", str(tmp_path / "r.html")])
    assert needle in err
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize(
    "index",
    [
        {"axes": []},
        {"points": "abc"},
        {"points": [{"id": 3}]},
        {"points": [{"id": "a", "file": "../../etc/passwd", "overrides": {}}]},
        {"points": [{"id": "a", "file": "points/a.json", "overrides": [1]}]},
    ],
)
def test_report_and_load_sweep_refuse_a_corrupt_sweep_index(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, result: dict[str, Any], index: Any
) -> None:
    folder = sweep_folder(tmp_path, result, index)
    err = one_line_error(capsys, ["report", str(folder), "--out", str(tmp_path / "r.html")])
    assert "sweep.json" in err
    pytest.importorskip("pandas")
    with pytest.raises(InputError):
        libra_des.load_sweep(folder)


def test_load_sweep_on_missing_empty_or_non_folders(tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("x")
    for bad in (tmp_path / "missing", tmp_path / "empty", tmp_path / "file", None, 3):
        with pytest.raises(InputError):
            libra_des.load_sweep(bad)  # type: ignore[arg-type]


def test_load_sweep_reads_a_good_sweep(tmp_path: Path, result: dict[str, Any]) -> None:
    pytest.importorskip("pandas")
    frame = libra_des.load_sweep(sweep_folder(tmp_path, result, GOOD_INDEX))
    assert list(frame["id"]) == ["a"] and frame["mfu"][0] == result["mfu"]


@pytest.mark.parametrize(
    ("entry", "needle"),
    [
        ("{metric: mfu, value: abc, source: x}", "non-zero number"),
        ("{metric: mfu, value: [1], source: x}", "non-zero number"),
        ("{metric: mfu, value: 0, source: x}", "non-zero number"),
        ("{metric: mfu, value: true, source: x}", "non-zero number"),
        ("{metric: mfu, value: .inf, source: x}", "finite"),
        ("{metric: [mfu], value: 1, source: x}", "metric name"),
        ("{metric: mfu, value: 1, source: x, where: 3}", "mapping"),
        ("{metric: mfu, value: 1, source: x, run: [1]}", "run name"),
        ("{metric: mfu, value: 1, metric: mfu, source: x}", "each key once"),
    ],
)
def test_report_refuses_a_bad_reference(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, result: dict[str, Any], entry: str,
    needle: str,
) -> None:
    folder = sweep_folder(tmp_path, result, GOOD_INDEX)
    ref = tmp_path / "ref.yaml"
    ref.write_text(f"- {entry}\n")
    err = one_line_error(capsys, ["report", str(folder), "--out", str(tmp_path / "r.html"),
                                  "--reference", str(ref)])
    assert needle in err
    assert not (tmp_path / "r.html").exists()


def test_report_tiny_reference_prints_no_infinite_difference(
    tmp_path: Path, result: dict[str, Any]
) -> None:
    folder = run_folder(tmp_path, json.dumps(result))
    ref = tmp_path / "ref.yaml"
    ref.write_text("- {metric: mfu, value: 1e-320, source: x}\n")
    out = tmp_path / "r.html"
    assert main(["report", str(folder), "--out", str(out), "--reference", str(ref)]) == 0
    assert "inf%" not in out.read_text()


@pytest.mark.parametrize("where", ["dir", "in_file", "long", "result", "reference"])
def test_report_output_path_checked_first(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, result: dict[str, Any], where: str
) -> None:
    folder = run_folder(tmp_path, json.dumps(result))
    ref = tmp_path / "ref.yaml"
    ref.write_text("- {metric: mfu, value: 0.5, source: x}\n")
    out = {"dir": tmp_path, "in_file": folder / "result.json" / "r.html",
           "long": tmp_path / ("a" * 300 + ".html"), "result": folder / "result.json",
           "reference": ref}[where]
    before = (folder / "result.json").read_text(), ref.read_text()
    err = one_line_error(capsys, ["report", str(folder), "--out", str(out), "--reference",
                                  str(ref)])
    assert err.startswith("error: --out:")
    assert ((folder / "result.json").read_text(), ref.read_text()) == before  # inputs kept


# ----------------------------------------------------------------------------- commands


def test_figs_refuses_empty_only_bad_workers_and_a_file_out(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "f"
    assert "--only" in one_line_error(capsys, ["figs", "--only", "", "--out", str(out)])
    assert "--only" in one_line_error(capsys, ["figs", "--only", "nope", "--out", str(out)])
    err = one_line_error(capsys, ["figs", "--only", "dp_scaling", "--workers", "1,2",
                                  "--out", str(out)])
    assert "single integer" in err
    afile = tmp_path / "file"
    afile.write_text("x")
    err = one_line_error(capsys, ["figs", "--only", "dp_scaling", "--tiny", "--out", str(afile)])
    assert "(a file)" in err and "a folder the tool created" in err
    assert not out.exists()


def test_run_table_checks_its_files_before_simulating(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, scenario: Path
) -> None:
    (tmp_path / "result.csv").mkdir()
    err = one_line_error(capsys, ["run", str(scenario), *SMALL, "--table", "--out",
                                  str(tmp_path)])
    assert "result.csv" in err
    assert not (tmp_path / "result.json").exists()


@pytest.mark.parametrize("where", ["file", "result_dir", "long"])
def test_quickstart_out_checked_before_simulating(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, scenario: Path, where: str
) -> None:
    if where == "file":
        out = scenario
    elif where == "result_dir":
        out = tmp_path / "q"
        (out / "ulysses" / "result.json").mkdir(parents=True)
    else:
        out = tmp_path / ("a" * 300)
    err = one_line_error(capsys, ["quickstart", "--scenario", str(scenario), *SMALL,
                                  "--out", str(out)])
    assert err.startswith("error: --out:")
    assert not capsys.readouterr().out  # no table: nothing was simulated


@pytest.mark.parametrize(
    "flags", [["--heads-split", "0"], ["--block-size", "nan"], ["--windows", "3"],
              ["--policy", "ulysses"], ["--gbs", "4"]],
)
def test_plan_tap_refuses_flags_it_would_ignore(
    capsys: pytest.CaptureFixture[str], scenario: Path, flags: list[str]
) -> None:
    err = one_line_error(capsys, ["plan", "--tap", "--scenario", str(scenario), *flags])
    assert "not with --tap" in err


@pytest.mark.parametrize(
    ("row", "needle"),
    [
        ("H200,bf16,nt,4,128,256,512,100,nan", "finite"),
        ("H200,bf16,nt,4,128,256,512,inf,10", "finite"),
        ("H200,bf16,nt,4,12", "truncated"),
        ("H200,bf16,nt,4,128,256,512,1e9,0.0000001", "TFLOP/s"),
        ("H200,bf16,nt,4,128,256,512,,1e300", "at most 3600 s"),
        ("H200,bf16,nt,4,128,256,512,1e-300,", "at most 3600 s"),
    ],
)
def test_grouped_gemm_import_is_strict(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, row: str, needle: str
) -> None:
    csv = tmp_path / "g.csv"
    csv.write_text(GROUPED_HEADER + row + "\n")
    out = tmp_path / "p.json"
    err = one_line_error(capsys, ["profile", "import", "--format", "grouped-gemm-csv",
                                  str(csv), "--out", str(out)])
    assert needle in err and ":2:" in err
    assert not out.exists()


# ----------------------------------------------------------------------------- Python API


@pytest.mark.parametrize(
    "call",
    [
        lambda sc: libra_des.simulate(None),  # type: ignore[arg-type]
        lambda sc: libra_des.load_scenario(b"/x"),  # type: ignore[arg-type]
        lambda sc: libra_des.simulate(sc, overrides=5),  # type: ignore[arg-type]
        lambda sc: libra_des.simulate(sc, trace=True, trace_ranks="ab"),  # type: ignore[arg-type]
        lambda sc: libra_des.step_plan(sc, step=10**9),
        lambda sc: libra_des.step_plan(sc, step=True),
        lambda sc: libra_des.cost("all_reduce", nbytes="8", group=8),  # type: ignore[arg-type]
        lambda sc: libra_des.cost("all_reduce", nbytes=8, group="8"),  # type: ignore[arg-type]
        lambda sc: libra_des.cost("all_reduce", nbytes=8, group=math.nan),  # type: ignore[arg-type]
        lambda sc: libra_des.cost("attention", doc_lengths=[100], heads=8, kv_heads=3),
        lambda sc: libra_des.cost("attention", doc_lengths="100", heads=8),  # type: ignore[arg-type]
        lambda sc: libra_des.cost("gemm", gemm=(1, 2)),  # type: ignore[arg-type]
        lambda sc: libra_des.cost("gemm", gemm=("a", "b", "c")),  # type: ignore[arg-type]
        lambda sc: libra_des.cost("gemm", gemm=(10**30, 8, 8)),
        lambda sc: libra_des.cost("all_reduce", nbytes=1e300, group=8),
        lambda sc: libra_des.cost("attention", doc_lengths=[10**15], heads=8),
        lambda sc: libra_des.cost("attention", doc_lengths=[9], heads=8, head_dim="x"),  # type: ignore[arg-type]
        lambda sc: libra_des.cost_model(profile=3),  # type: ignore[arg-type]
    ],
)
def test_api_bad_arguments_raise_input_error(scenario: Path, call: Any) -> None:
    with pytest.raises(InputError) as info:
        call(scenario)
    assert info.value.line().startswith("error: ") and "\n" not in info.value.line()


def test_figs_rerun_into_its_own_out_folder_is_not_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("matplotlib")
    from paper_figs import catalog

    monkeypatch.setattr(catalog, "draw", lambda entries, opts, done: [])
    assert main(["figs", "--only", "dp_scaling", "--tiny", "--out", str(tmp_path)]) == 0
    (tmp_path / "data").mkdir()  # what a first run leaves behind
    assert main(["figs", "--only", "dp_scaling", "--tiny", "--out", str(tmp_path)]) == 0
    (tmp_path / "figures.json").unlink()
    (tmp_path / "figures.json").mkdir()
    assert main(["figs", "--only", "dp_scaling", "--tiny", "--out", str(tmp_path)]) == 2


@pytest.mark.parametrize("word", ["yes", "no", "on", "off"])
def test_yaml_11_booleans_are_not_switches(word: str) -> None:
    """YAML 1.2 booleans only: `yes`/`off` stay text, which a switch refuses in one line."""
    with pytest.raises(InputError, match=rf"^error: memory\.keep_remote_kv: got '{word}'"):
        libra_des.load_scenario(Path(__file__).resolve().parent.parent / "scenarios"
                                / "quickstart.yaml",
                                [f"memory.keep_remote_kv={word}"])
