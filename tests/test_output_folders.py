"""The output-folder policy (libra_des/base/ownership.py), writer by writer.

Each refusal is one line, exit 2, before any work, and leaves every file that was in the
folder byte-identical (the folder is hashed before and after). A rerun replaces its own
outputs only; a property test throws random folders at a writer.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from libra_des.base import ownership
from libra_des.cli import main
from libra_des.errors import CheckError, InputError
from libra_des.results.plausibility import check_numbers
from libra_des.sim.chakra import files as chakra_files
from tests.test_hostile_new import SMALL, TINY  # 16 GPUs, one step, two layers


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sc") / "tiny.yaml"
    path.write_text(json.dumps(TINY))  # JSON is YAML
    return path


def snapshot(folder: Path) -> dict[str, str]:
    """Every entry below ``folder``: a file's sha256, or what else it is (never opened)."""
    found = {}
    for root, dirs, names in os.walk(folder):
        for name in dirs + names:
            path = Path(root) / name
            mode = path.lstat().st_mode
            rel = str(path.relative_to(folder))
            if stat.S_ISREG(mode):
                found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                found[rel] = "dir" if stat.S_ISDIR(mode) else f"mode {stat.S_IFMT(mode)}"
    return found


def refused(capsys: pytest.CaptureFixture[str], argv: list[str], folder: Path) -> str:
    """Run the CLI; assert exit 2, one ``error:`` line, and ``folder`` left untouched."""
    before = snapshot(folder)
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
    assert snapshot(folder) == before
    return err


# ----------------------------------------------------------------------------- writers


def test_run_refuses_a_foreign_folder_and_an_edited_record(
    capsys: pytest.CaptureFixture[str], scenario: Path, tmp_path: Path
) -> None:
    out = tmp_path / "o"
    out.mkdir()
    (out / "result.json").write_text("my own notes")
    err = refused(capsys, ["run", str(scenario), *SMALL, "--out", str(out)], tmp_path)
    assert "a folder the tool created or an empty/new one" in err
    (out / "result.json").unlink()  # an empty folder is fine
    assert main(["run", str(scenario), *SMALL, "--out", str(out), "--trace", "--json"]) == 0
    capsys.readouterr()
    # A run.json the user edited no longer vouches for trace.json: nothing is removed.
    record = out / "run.json"
    record.write_text(record.read_text().replace('"files"', '"files" ', 1))
    refused(capsys, ["run", str(scenario), *SMALL, "--out", str(out)], tmp_path)
    # A hand-written manifest (its digest fails) is not the tool's.
    record.unlink()
    manifest = out / ownership.MANIFEST
    data = json.loads(manifest.read_text())
    data["files"]["notes.txt"] = "0" * 64
    manifest.write_text(json.dumps(data))
    assert "no valid" in refused(capsys, ["run", str(scenario), *SMALL, "--out", str(out)],
                                 tmp_path)


def test_run_keeps_the_users_other_files_in_its_folder(
    capsys: pytest.CaptureFixture[str], scenario: Path, tmp_path: Path
) -> None:
    out = tmp_path / "o"
    assert main(["run", str(scenario), *SMALL, "--out", str(out), "--trace", "--json"]) == 0
    (out / "notes.txt").write_text("mine")
    assert main(["run", str(scenario), *SMALL, "--out", str(out), "--json"]) == 0
    capsys.readouterr()
    assert (out / "notes.txt").read_text() == "mine" and not (out / "trace.json").exists()


def test_chakra_export_refuses_foreign_rank_files_and_drops_its_stale_ones(
    capsys: pytest.CaptureFixture[str], scenario: Path, tmp_path: Path
) -> None:
    et = tmp_path / "et"
    et.mkdir()
    (et / "libra.0.et").write_bytes(b"mine")
    refused(capsys, ["run", str(scenario), *SMALL, "--out", str(tmp_path / "o"), "--chakra",
                     str(et)], tmp_path)
    assert not (tmp_path / "o").exists()
    # A second export into the same folder removes the first's rank files it does not write.
    chakra = tmp_path / "c"
    chakra_files.check_folder(chakra)
    chakra_files.write_folder(chakra, {0: b"a", 1: b"b", 2: b"c"}, {"dp": [0, 1, 2]})
    (chakra / "notes.txt").write_text("mine")
    chakra_files.check_folder(chakra)
    chakra_files.write_folder(chakra, {0: b"x", 1: b"y"}, {"dp": [0, 1]})
    assert sorted(p.name for p in chakra.glob("[!.]*")) == [
        "comm_group.json", "libra.0.et", "libra.1.et", "notes.txt"]


def test_sweep_refuses_before_any_point_runs(
    capsys: pytest.CaptureFixture[str], scenario: Path, tmp_path: Path
) -> None:
    out = tmp_path / "sw"
    argv = ["sweep", str(scenario), *SMALL, "--grid", "seed=0,1", "--out", str(out),
            "--workers", "1"]
    assert main(argv) == 0
    capsys.readouterr()
    points = sorted((out / "points").glob("[!.]*.json"))
    for what in ("sweep.csv", ".lock", points[0].relative_to(out)):
        target = out / what
        saved = target.read_bytes()
        target.unlink()
        target.mkdir()  # a folder where a file goes: refused before any point runs
        assert str(what) in refused(capsys, argv, tmp_path)
        target.rmdir()
        target.write_bytes(saved)
    (out / "sweep.csv").write_text("mine\n")  # edited since the sweep wrote it
    assert "sweep.csv" in refused(capsys, argv, tmp_path)


def test_api_sweep_refuses_a_foreign_folder(scenario: Path, tmp_path: Path) -> None:
    from libra_des import api

    (tmp_path / "sweep.json").write_text("{}")
    before = snapshot(tmp_path)
    with pytest.raises(InputError, match="a folder the tool created"):
        api.run_sweep(str(scenario), [{"seed": [0]}], tmp_path, workers=1)
    assert snapshot(tmp_path) == before


def test_api_write_output_replaces_only_its_own_file(tmp_path: Path) -> None:
    from libra_des import api

    path = tmp_path / "plan.json"
    api.write_output(path, "{}")
    api.write_output(path, "[]")  # its own, unchanged: replaced
    path.write_text("edited")
    with pytest.raises(InputError, match="nobody changed since"):
        api.write_output(path, "{}")
    assert path.read_text() == "edited"


def test_figs_calibrate_and_report_refuse_the_users_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "f"
    out.mkdir()
    (out / "dp_scaling.png").write_bytes(b"\x89PNG mine")
    refused(capsys, ["figs", "--only", "dp_scaling", "--tiny", "--out", str(out)], tmp_path)
    (out / "profile.json").write_text("{}")
    refused(capsys, ["calibrate", "--device", "cpu", "--out", str(out)], tmp_path)
    run = tmp_path / "r"
    run.mkdir()
    page = tmp_path / "page.html"
    page.write_text("<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>libra-des "
                    "report: mine")  # looks like a report, but no manifest vouches for it
    assert "page.html" in refused(capsys, ["report", str(run), "--out", str(page)], tmp_path)


def test_a_file_where_the_output_folder_goes_names_the_flag(
    capsys: pytest.CaptureFixture[str], scenario: Path, tmp_path: Path
) -> None:
    afile = tmp_path / "out"
    afile.write_text("x")
    err = refused(capsys, ["run", str(scenario), *SMALL, "--out", str(afile)], tmp_path)
    assert err.startswith("error: --out: got ") and "(a file)" in err
    data = tmp_path / "figs"
    data.mkdir()
    (data / "data").write_text("x")
    refused(capsys, ["figs", "--only", "dp_scaling", "--tiny", "--out", str(data)], tmp_path)


# ----------------------------------------------------------------------------- special files


def test_pipes_sockets_devices_and_link_loops_are_refused_unopened(
    capsys: pytest.CaptureFixture[str], scenario: Path, tmp_path: Path
) -> None:
    fifo = tmp_path / "pipe.et"
    os.mkfifo(fifo)
    assert "a pipe" in refused(capsys, ["import", "chakra", str(fifo)], tmp_path)
    assert "a pipe" in refused(capsys, ["import", "chakra", str(tmp_path)], tmp_path)
    run = tmp_path / "r"
    run.mkdir()
    assert "a pipe" in refused(capsys, ["report", str(run), "--out", str(fifo)], tmp_path)
    if Path("/dev/null").exists():
        assert "a device" in refused(capsys, ["report", str(run), "--out", "/dev/null"],
                                     tmp_path)
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert "loop" in refused(capsys, ["run", str(loop)], tmp_path)
    assert "loop" in refused(capsys, ["run", str(scenario), *SMALL, "--out",
                                      str(loop / "o")], tmp_path)
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(tmp_path / "s"))
        with pytest.raises(InputError, match="a socket"):
            ownership.check_special(tmp_path / "s", "x")
    finally:
        sock.close()


# ----------------------------------------------------------------------------- plausibility


def test_rounding_noise_is_clamped_and_real_violations_still_fail() -> None:
    result = {"bubble_fraction": -3e-17, "mfu": 1 + 1e-13, "time_s": -1e-15,
              "imbalance_ratio": {"mean": 1 - 1e-14}, "x": [{"idle_fraction": -1e-16}]}
    check_numbers(result)
    assert result == {"bubble_fraction": 0.0, "mfu": 1.0, "time_s": 0.0,
                      "imbalance_ratio": {"mean": 1.0}, "x": [{"idle_fraction": 0.0}]}
    for bad in ({"bubble_fraction": -0.01}, {"mfu": 1.01}, {"time_s": -1.0}):
        with pytest.raises(CheckError):
            check_numbers(bad)


# ----------------------------------------------------------------------------- property


NAMES = ("libra.0.et", "libra.1.et", "libra.7.et", "comm_group.json", "notes.txt",
         ownership.MANIFEST, "result.json")


@st.composite
def folders(draw: st.DrawFn) -> tuple[int | None, list[tuple[str, bytes]], int]:
    """(ranks of an earlier export or None, files then written or overwritten, new ranks)."""
    earlier = draw(st.none() | st.integers(1, 3))
    extra = draw(st.lists(st.tuples(st.sampled_from(NAMES), st.binary(max_size=8)),
                          max_size=3))
    return earlier, extra, draw(st.integers(1, 3))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=folders())
def test_a_writer_refuses_untouched_or_touches_only_its_own_files(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[int | None, list[tuple[str, bytes]],
                                                          int],
) -> None:
    earlier, extra, ranks = case
    folder = tmp_path_factory.mktemp("fz") / "et"
    if earlier is not None:
        chakra_files.write_folder(folder, {r: b"old%d" % r for r in range(earlier)}, {})
    folder.mkdir(exist_ok=True)
    for name, data in extra:  # the user's files, or edits of ours (the manifest's too)
        (folder / name).write_bytes(data)
    before = snapshot(folder)
    vouched = ownership.load(folder) or {}
    try:
        chakra_files.check_folder(folder)
    except InputError:
        assert snapshot(folder) == before
        return
    valid = ownership.load(folder) is not None
    chakra_files.write_folder(folder, {r: b"new%d" % r for r in range(ranks)}, {})
    after = snapshot(folder)
    for name, sha in before.items():
        if name == ownership.MANIFEST and after.get(name) != sha:
            assert valid  # only its own manifest, intact, is rewritten
        elif after.get(name) != sha:
            assert vouched.get(name) == sha, name  # only files it wrote, unchanged since
    assert {f"libra.{r}.et" for r in range(ranks)} <= set(after)
    assert not {n for n in after if n.endswith(".et")} - {f"libra.{r}.et" for r in range(ranks)}


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(earlier=st.booleans(), edits=st.lists(st.tuples(
    st.sampled_from(("page.html", "other.html", ownership.MANIFEST)), st.binary(max_size=8)),
    max_size=2))
def test_a_single_file_writer_replaces_only_its_own_unchanged_file(
    tmp_path_factory: pytest.TempPathFactory, earlier: bool, edits: list[tuple[str, bytes]],
) -> None:
    from libra_des.config.validation import check_output_file

    folder = tmp_path_factory.mktemp("pg")
    page = folder / "page.html"
    if earlier:
        ownership.record_write(page, "<p>first</p>")
    for name, data in edits:
        (folder / name).write_bytes(data)
    before = snapshot(folder)
    vouched = ownership.load(folder) or {}
    valid = ownership.load(folder) is not None
    try:
        check_output_file(page, "--out")
    except InputError:
        assert snapshot(folder) == before
        return
    ownership.record_write(page, "<p>second</p>")
    after = snapshot(folder)
    assert before.get("page.html") in (None, vouched.get("page.html"))
    assert valid or ownership.MANIFEST not in before  # never over a manifest not its own
    assert {k: v for k, v in after.items() if k not in ("page.html", ownership.MANIFEST)} == {
        k: v for k, v in before.items() if k not in ("page.html", ownership.MANIFEST)}
    assert ownership.load(folder) is not None  # the tool's manifest again, vouching the page
