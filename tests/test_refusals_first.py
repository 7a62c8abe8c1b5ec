"""Bad input is one line on stderr, exit 2, before any work: knobs against the machine,
Ulysses' heads rule and the memory floor (before the progress bar), a sweep's --set against
its axes, calibrate's ranks and seed, a references file's entries."""

from __future__ import annotations

from pathlib import Path

import pytest

from libra_des.cli import main

ROOT = Path(__file__).resolve().parents[1]
QUICK = str(ROOT / "scenarios" / "quickstart.yaml")
MOE = str(ROOT / "scenarios" / "moe-glm45.yaml")


def one_line(capsys: pytest.CaptureFixture[str], argv: list[str], field: str) -> str:
    """Run ``argv``: exit 2, stderr exactly one line naming ``field``, stdout empty."""
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith(f"error: {field}: "), repr(err)
    assert out == "" and "Traceback" not in err and "internal error" not in err
    return err


RUN_REFUSALS = [
    # NVLS, CollNet and LL128 against the fabric (the cost model's own check).
    (QUICK, ["topology=pcie-8x", "comm.algorithm=nvls"], "comm.algorithm"),
    (QUICK, ["comm.algorithm=collnet_direct"], "comm.algorithm"),
    (QUICK, ["topology=pcie-8x", "comm.protocol=LL128"], "comm.protocol"),
    # Channels and SMs per channel within the GPU record's 132 SMs (H200-SXM).
    (QUICK, ["comm.channels=100000"], "comm.channels"),
    (QUICK, ["comm.sm_per_channel=200"], "comm.sm_per_channel"),
    (QUICK, ["comm.channels=40", "comm.sm_per_channel=4"], "comm.channels"),
    # Ulysses gives each CP rank heads_q / cp heads (32 heads here).
    (QUICK, ["balancer.policy=ulysses", "parallelism.cp=6"], "parallelism.cp"),
    # The memory floor on the first window.
    (QUICK, ["memory.usable_fraction=0.05"], "memory.recompute"),
    # FP8 experts on a GPU whose record has no FP8 (A100).
    (MOE, ["topology=a100-dgx-ib-hdr", "model.dtype=fp8"], "model.dtype"),
    (MOE, ["comm.channels=100000"], "comm.channels"),
]


@pytest.mark.parametrize(("scenario", "sets", "field"), RUN_REFUSALS)
def test_run_refuses_before_the_progress_bar(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, scenario: str, sets: list[str],
    field: str,
) -> None:
    # --progress forces the bar: a refusal after it starts would leave its line behind.
    argv = ["run", scenario, *(a for s in sets for a in ("--set", s)), "--progress",
            "--out", str(tmp_path / "o")]
    one_line(capsys, argv, field)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("scenario", "sets", "field"), RUN_REFUSALS[:3] + RUN_REFUSALS[8:9])
def test_scenario_show_refuses_what_run_refuses(
    capsys: pytest.CaptureFixture[str], scenario: str, sets: list[str], field: str
) -> None:
    one_line(capsys, ["scenario", "show", scenario, *(a for s in sets for a in ("--set", s))],
             field)


def test_a_fitting_channel_count_runs_through_elaboration() -> None:
    import libra_des.api as api

    sc = api.load_scenario(QUICK, {"comm.channels": 32, "comm.sm_per_channel": 4})
    assert (sc.comm.channels, sc.comm.sm_per_channel) == (32, 4)


def test_sweep_refuses_a_set_key_an_axis_sets(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for sets, grid in ((["seed=3"], "seed=1,2"), (["parallelism.cp=8"], "parallelism=1"),
                       (["comm={channels: 4}"], "comm.channels=8,16")):
        argv = ["sweep", QUICK, *(a for s in sets for a in ("--set", s)), "--grid", grid,
                "--out", str(tmp_path / "s")]
        one_line(capsys, argv, "--set")
        assert not (tmp_path / "s").exists()


def test_sweep_refuses_a_bad_point_before_any_point_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["sweep", QUICK, "--set", "steps=1", "--set", "balancer.policy=ulysses",
            "--grid", "parallelism.cp=8,6", "--out", str(tmp_path / "s")]
    one_line(capsys, argv, "parallelism.cp")
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(("flags", "field"), [
    (["--world", "0"], "--world"),
    (["--world", "-1"], "--world"),
    (["--world", "4096"], "--world"),
    (["--seed", "-3"], "--seed"),
])
def test_calibrate_checks_ranks_and_seed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, flags: list[str], field: str
) -> None:
    pytest.importorskip("torch", reason="calibrate needs torch (the calibrate extra)")
    argv = ["calibrate", "--device", "cpu", "--quick", *flags, "--out", str(tmp_path / "c")]
    one_line(capsys, argv, field)
    assert not (tmp_path / "c").exists()


def test_calibrate_ranks_beyond_the_cores_say_how_to_override(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch", reason="calibrate needs torch (the calibrate extra)")
    monkeypatch.setattr("libra_des.calibrate.run.cpu_cores", lambda: 2)
    argv = ["calibrate", "--device", "cpu", "--quick", "--world", "64", "--out",
            str(tmp_path / "c")]
    assert "--no-preflight" in one_line(capsys, argv, "--world")


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run") / "r"
    assert main(["run", QUICK, "--set", "steps=1", "--out", str(out), "--json"]) == 0
    return out


@pytest.mark.parametrize(("text", "field"), [
    ("- {metric: tokens_per_s, value: 1000, source: {paper: [a, b], via: x}}\n",
     "--reference tokens_per_s.source"),
    ("- {metric: tokens_per_s, value: 1000, source: [1, 2]}\n",
     "--reference tokens_per_s.source"),
    ("- {metric: tokens_per_s, value: 1000, source: mine, bogus: 3}\n", "--reference"),
])
def test_report_refuses_a_bad_references_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, run_folder: Path, text: str,
    field: str,
) -> None:
    capsys.readouterr()
    ref = tmp_path / "ref.yaml"
    ref.write_text(text)
    one_line(capsys, ["report", str(run_folder), "--reference", str(ref), "--out",
                      str(tmp_path / "r.html")], field)
    assert not (tmp_path / "r.html").exists()


def test_report_refuses_a_references_symlink_loop(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, run_folder: Path
) -> None:
    capsys.readouterr()
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop)
    one_line(capsys, ["report", str(run_folder), "--reference", str(loop), "--out",
                      str(tmp_path / "r.html")], "--reference")


def on_a_terminal(argv: list[str]) -> tuple[int, str]:
    """Run the CLI with stderr on a pseudo-terminal (rich draws progress bars only there):
    its exit status and everything it wrote there."""
    import os
    import pty
    import select
    import subprocess
    import sys

    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "120", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "libra_des.cli", *argv], stdin=slave,
                            stdout=subprocess.DEVNULL, stderr=slave, env=env)
    os.close(slave)
    out = b""
    while select.select([master], [], [], 300)[0]:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return proc.wait(timeout=300), out.decode(errors="replace")


@pytest.mark.parametrize(("sets", "field"), [RUN_REFUSALS[0][1:], RUN_REFUSALS[6][1:],
                                             RUN_REFUSALS[7][1:]])
def test_on_a_terminal_nothing_precedes_the_line(
    tmp_path: Path, sets: list[str], field: str
) -> None:
    argv = ["run", QUICK, *(a for s in sets for a in ("--set", s)), "--out",
            str(tmp_path / "o")]
    code, text = on_a_terminal(argv)
    assert code == 2
    # Exactly the line: no bar drawn and erased (escape codes), no blank line before it.
    assert text.startswith(f"error: {field}: ") and text.count("\n") == 1, repr(text)
    assert "\x1b" not in text
