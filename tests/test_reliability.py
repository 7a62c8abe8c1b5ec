"""The one-line-error contract on hostile input: one test per class of the audit.

Every case must end as exit 2 with exactly one ``error:`` line on stderr and no result
written, or as a correct result. Cases fail before any simulation, so the file runs in
seconds; the few that need a result use a 16-GPU, 2-layer scenario.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from libra_des.cli import main
from libra_des.commands import safety
from libra_des.config import ROOT
from libra_des.errors import CheckError
from libra_des.results.plausibility import check_numbers, check_training

QUICK = str(ROOT / "scenarios" / "quickstart.yaml")
MOE = str(ROOT / "scenarios" / "moe-glm45.yaml")
TINY = """\
name: tiny
kind: training
steps: 1
topology: h200-roce-railopt
model: qwen3-30b-a3b
workload: longctx-256k
parallelism: {dp: 2, pp: 1, cp: 8, tp: 1, gbs: 2}
balancer: {policy: libra, pool_size: 2}
memory: {recompute: full}
"""
SMALL = ["--set", "model.layers=2"]
#: Ten levels of ten aliases each: 10^10 values if expanded (a "billion laughs" document).
ALIAS_BOMB = "l0: &l0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
    f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n" for i in range(1, 10)
)


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], code: int = 2) -> str:
    """Run the CLI in-process; assert exit ``code`` and a single stderr line; return it."""
    assert main(argv) == code, argv
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error:"), err
    assert "Traceback" not in err
    return err


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    return path


# ----------------------------------------------------------------------------- scenarios


@pytest.mark.parametrize(
    ("setting", "needle"),
    [
        ("balancer.slack=.inf", "finite"),
        ("variance.noise_sigma=.nan", "finite"),
        ("variance.noise_sigma=1e6", "<= 1"),
        ("balancer.slack=1e999", "finite"),
        ("topology_params={nodes: .inf}", "finite"),
        ("parallelism.dp=true", "not true/false"),
        ("steps='1'", "quoted string"),
        ("variance.enabled=1", "true or false"),
        ("parallelism.gbs=1e12", "<="),
        ("parallelism.dp=1000000", "<="),
        ("workload.routing.profile_requests=1000000000", "<= 65,536"),
        ("parallelism.pp=100", "model.layers"),
        ("model.dense_layers=1000", "layers"),
        ("model.heads_kv=3", "divisor"),
        ("workload.lengths={kind: constant, value: 10, min: 200, max: 100}", ">= lengths.min"),
        ("balancer.slots=4", "only kind=moe_inference reads it"),
        ("variance={enabled: true, enabled: false}", "each key once"),
        ("a=" + "[" * 40 + "]" * 40, "nesting"),
        ("topology_params={nodes: 131072, gpus_per_node: 1024}", "GPUs in the topology"),
        ("topology_params={levels: {2: {count: 1000000000}}}", "levels[2].count"),
        ("topology_params={levels: {1: {bandwidth: 1e999GB/s}}}", "finite"),
        ("balancer.block_size=1", "--no-preflight"),
        # Refused by the window's size bound (before the preflight would be asked).
        ("workload.lengths.max=1", "<= 50,000,000 pieces"),
    ],
)
def test_bad_scenario_values_are_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    setting: str, needle: str,
) -> None:
    # The preflight compares with this machine's free memory: pin it to a CI-sized 8 GB.
    monkeypatch.setattr("libra_des.kinds.preflight.available_bytes", lambda: 8e9)
    out = tmp_path / "out"
    err = one_line_error(capsys, ["run", QUICK, "--set", setting, "--out", str(out)])
    assert needle in err
    assert not out.exists()


def test_a_window_of_tiny_samples_is_refused_before_they_are_drawn() -> None:
    """Samples of one token each, a window of 2^28 tokens: refused after the first small draw
    (which measures the mean), never after drawing tens of millions of samples."""
    from libra_des.config import LengthDist
    from libra_des.errors import InputError
    from libra_des.workload.packing import MAX_PIECES, CorpusStream

    stream = CorpusStream(LengthDist(kind="constant", value=1, min=1, max=1), 1 << 21,
                          np.random.default_rng(0))
    asked: list[int] = []
    sampler = stream.sampler
    stream.sampler = lambda n, rng: (asked.append(n), sampler(n, rng))[1]
    with pytest.raises(InputError, match=f"<= {MAX_PIECES:,} pieces"):
        stream.next_window(128)
    assert asked == [256]


@pytest.mark.parametrize(
    ("setting", "needle"),
    [
        ("parallelism.pp=4", "parallelism.pp"),
        ("workload.routing.profile_requests=1000000", "profile_requests"),
        ("workload.routing.trace=" + str(ROOT / "README.md"), "trace"),
    ],
)
def test_bad_moe_values_are_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, setting: str, needle: str
) -> None:
    err = one_line_error(capsys, ["run", MOE, "--set", setting, "--out", str(tmp_path / "o")])
    assert needle in err


def test_moe_trace_and_npy_routing_trace(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    err = one_line_error(capsys, ["run", MOE, "--trace", "--trace-ranks", "0", "--out",
                                  str(tmp_path / "o")])
    assert "training scenarios only" in err  # an MoE trace shows every GPU
    npy = tmp_path / "t.npy"
    np.save(npy, np.zeros((4, 89, 8), dtype=np.int32))
    err = one_line_error(
        capsys, ["run", MOE, "--set", f"workload.routing.trace={npy}", "--out",
                 str(tmp_path / "o")]
    )
    assert ".npz" in err


@pytest.mark.parametrize(
    "text",
    [
        "steps: 1\nsteps: 2\n",
        "model: {layers: 1, layers: 2}\n",
        "x: " + "[" * 3000 + "]" * 3000 + "\n",
        "x: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n",
        ALIAS_BOMB,
        "steps: .inf\n",
    ],
)
def test_hostile_yaml_files(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    one_line_error(capsys, ["run", str(path), "--out", str(tmp_path / "o")])


def test_endless_and_special_input_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    assert "regular file" in one_line_error(capsys, ["run", str(fifo)])
    if Path("/dev/zero").exists():  # a device: refused unopened, like the pipe
        assert "a device" in one_line_error(capsys, ["run", "/dev/zero"])
    big = tmp_path / "big.yaml"  # a runaway regular file: refused past the read bound
    with big.open("wb") as fh:
        fh.truncate((256 << 20) + 1)
    assert "256 MB" in one_line_error(capsys, ["run", str(big)])


def test_file_names_longer_than_the_os_allows(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    long = str(tmp_path / ("x" * 300 + ".yaml"))
    one_line_error(capsys, ["run", long])
    one_line_error(capsys, ["run", QUICK, "--set", f"workload={'w' * 300}"])
    one_line_error(capsys, ["profile", "show", "p" * 300])
    one_line_error(capsys, ["run", QUICK, "--out", str(tmp_path / ("o" * 300))])


# ----------------------------------------------------------------------------- outputs


def test_output_paths_checked_before_work(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert "file" in one_line_error(capsys, ["run", QUICK, "--out", str(afile)])
    one_line_error(capsys, ["run", QUICK, "--out", str(afile / "sub")])
    folder = tmp_path / "res"
    (folder / "result.json").mkdir(parents=True)
    assert "folder" in one_line_error(capsys, ["run", QUICK, "--out", str(folder)])
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        try:
            assert "read-only" in one_line_error(capsys, ["run", QUICK, "--out", str(ro / "x")])
        finally:
            ro.chmod(0o700)


def test_results_default_folders_and_stale_trace(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "exp.yaml").write_text(TINY)
    assert main(["run", "a/exp.yaml", *SMALL, "--trace", "--json"]) == 0
    assert (tmp_path / "runs/exp/trace.json").is_file()
    assert main(["run", "a/exp.yaml", *SMALL, "--json"]) == 0
    assert not (tmp_path / "runs/exp/trace.json").exists()  # stale trace removed
    assert main(["run", "b/exp.yaml", *SMALL, "--set", "seed=1", "--json"]) == 0
    err = capsys.readouterr().err
    assert "another scenario" in err
    folders = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert folders[0] == "exp" and folders[1].startswith("exp-") and len(folders) == 2
    a = json.loads((tmp_path / "runs/exp/result.json").read_text())
    assert a["scenario"]["seed"] == 0


def test_trace_ranks(capsys: pytest.CaptureFixture[str], tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "o"
    err = one_line_error(capsys, ["run", QUICK, "--trace", "--set", "steps=5000",
                                  "--out", str(out)])
    assert "--trace-ranks" in err  # too many events: pick rank groups
    err = one_line_error(capsys, ["run", str(tiny), *SMALL, "--trace", "--trace-ranks", "999",
                                  "--out", str(out)])
    assert "0..0" in err and not out.exists()
    one_line_error(capsys, ["run", str(tiny), "--trace-ranks", "0", "--out", str(out)])
    assert main(["run", str(tiny), *SMALL, "--trace", "--trace-ranks", "0", "--out", str(out),
                 "--json"]) == 0
    once = json.loads((out / "trace.json").read_text())["traceEvents"]
    assert main(["run", str(tiny), *SMALL, "--trace", "--trace-ranks", "0,0", "--out", str(out),
                 "--json"]) == 0
    twice = json.loads((out / "trace.json").read_text())["traceEvents"]
    assert len(once) == len(twice) > 0


def test_broken_pipe_is_quiet(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def closed(_args: Any) -> int:
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    assert safety.guarded(closed, None, "run") == 0
    assert capsys.readouterr().err == ""


def test_safety_net_lines(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(_args: Any) -> int:
        raise RuntimeError("unexpected\nsecond line")

    def check(_args: Any) -> int:
        raise CheckError("fractions in [0, 1]", "mfu = 1.5")

    def full(_args: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device", "runs/x/result.json")

    def oom(_args: Any) -> int:
        raise MemoryError

    def exit_now(code: int) -> None:
        raise SystemExit(code)

    for handler, code, needle in ((boom, 3, "bug"), (check, 3, "check failed"),
                                  (full, 2, "No space left")):
        assert safety.guarded(handler, None, "run") == code
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and needle in err and "run" in err
    safety.guarded(full, None, "run")  # the contract's form: field, value, what is allowed
    assert capsys.readouterr().err.startswith("error: run: got 'runs/x/result.json (No space")
    monkeypatch.setattr(safety.os, "_exit", exit_now)
    with pytest.raises(SystemExit) as stop:
        safety.guarded(oom, None, "run")
    assert stop.value.code == 2  # the input asked for more than the machine has
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "more memory" in err and "GiB" in err


def check_result(result: dict[str, Any], peak: float, flops: float) -> None:
    """What the training kind's simulate applies to its result (libra_des.kinds.training)."""
    check_numbers(result)
    check_training(result, flops, peak)


def test_plausibility_checks() -> None:
    good: dict[str, Any] = {"kind": "training", "gpus": 8, "mfu": 0.4,
                            "bubble_fraction": 0.1, "step_time_s": {"mean": 1.0}}
    check_result(good, 1e15, 1e15)
    for bad in ({"mfu": 1.5}, {"bubble_fraction": float("nan")}, {"bubble_fraction": -0.2},
                {"step_time_s": {"mean": 0.1}}):
        with pytest.raises(CheckError):
            check_result(good | bad, 1e15, 1e15)
    with pytest.raises(CheckError):  # executed faster than the compute roofline of the work
        check_result(good, 1e15, 1e17)


# ----------------------------------------------------------------------------- commands


@pytest.mark.parametrize(
    "argv",
    [
        ["cost", "--op", "all_reduce", "--bytes", "inf", "--group", "8"],
        ["cost", "--op", "all_reduce", "--bytes", "nan", "--group", "8"],
        ["cost", "--op", "all_reduce", "--bytes", "-5", "--group", "8"],
        ["cost", "--op", "all_reduce", "--bytes", "1" * 300, "--group", "8"],
        ["cost", "--op", "all_reduce", "--bytes", "1024", "--group", "1000000000000"],
        ["cost", "--op", "all_reduce", "--bytes", "1024", "--group", "0"],
        ["cost", "--op", "attention", "--doc-lengths", "4096", "--heads", "8", "--kv-heads", "3"],
        ["cost", "--op", "attention", "--doc-lengths", "9" * 30, "--heads", "8"],
        ["cost", "--op", "gemm", "--m", "0", "--n", "1", "--k", "1"],
        ["cost", "--op", "send_recv", "--bytes", "1e-300", "--group", "2"],
        ["plan", "--cp", "100000"],
        ["plan", "--gbs", "1000000000000"],
        ["sweep", QUICK, "--grid", "seed=" + ",".join(map(str, range(20_000)))],
        ["sweep", QUICK, "--workers", "100000"],
    ],
)
def test_command_flags_are_bounded(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    one_line_error(capsys, argv)


def test_sweep_lock_refuses_a_second_writer(
    capsys: pytest.CaptureFixture[str], tiny: Path, tmp_path: Path
) -> None:
    from libra_des.runs.sweep_safety import folder_lock

    out = tmp_path / "sw"
    with folder_lock(out):
        err = one_line_error(capsys, ["sweep", str(tiny), *SMALL, "--grid", "seed=0,1",
                                      "--out", str(out), "--workers", "1"])
    assert "no other running sweep" in err
    assert not (out / "points").exists()
    (out / "points").write_text("not a folder")
    one_line_error(capsys, ["sweep", str(tiny), *SMALL, "--grid", "seed=0,1", "--out", str(out)])


def test_sweep_interrupt_keeps_points_and_says_how_to_resume(
    capsys: pytest.CaptureFixture[str], tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from libra_des.commands import sweep as sweep_cmd
    from libra_des.runs import sweep

    def one_then_interrupt(scenarios: Any) -> Any:
        yield 0, sweep.run_point(scenarios[0])
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep_cmd, "pick_executor", lambda _a: one_then_interrupt)
    out = tmp_path / "sw"
    code = main(["sweep", str(tiny), *SMALL, "--grid", "seed=0,1", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 130 and "rerun the same command to resume" in err
    assert len(list((out / "points").glob("*.json"))) == 1


def test_workers_die_with_their_driver(tmp_path: Path) -> None:
    """A pool worker exits within about a second of its driver being killed."""
    script = textwrap.dedent(
        """
        import os, sys, time
        from concurrent.futures import ProcessPoolExecutor
        from multiprocessing import get_context
        from libra_des.runs.sweep_safety import worker_init
        if __name__ == "__main__":
            pool = ProcessPoolExecutor(1, mp_context=get_context("spawn"),
                                       initializer=worker_init, initargs=(os.getpid(),))
            pid = pool.submit(os.getpid).result()
            pool.submit(time.sleep, 60)
            print(pid, flush=True)
            os._exit(0)
        """
    )
    path = tmp_path / "driver.py"
    path.write_text(script)
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          timeout=60, check=True)
    pid = int(done.stdout.split()[0])
    import time

    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, 9)
    pytest.fail("worker outlived its driver by 5 s")


@pytest.mark.parametrize("cp", [1, 2])
def test_layouts_smaller_than_a_node_run(tiny: Path, tmp_path: Path, cp: int) -> None:
    """2 or 4 GPUs in one node: the expert-gradient all-reduce stays inside the node."""
    out = tmp_path / "o"
    argv = ["run", str(tiny), *SMALL, "--set", f"parallelism.cp={cp}", "--out", str(out), "--json"]
    assert main(argv) == 0
    result = json.loads((out / "result.json").read_text())
    assert result["gpus"] == 2 * cp and 0 < result["mfu"] <= 1
