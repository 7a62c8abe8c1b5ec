"""The torch calibration harness (CPU, gloo) and ``libra-des validate``.

The harness runs once per module on the CPU with two gloo ranks and the quick sizes; the
tests check what it wrote and what ``validate`` says about it. ``validate`` is also checked
against closed forms on a hand-built profile, and its replay against the fitter's own
in-sample errors on the public nccl-tests logs.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from libra_des.cli import main
from libra_des.hardware.collectives.curves import NIC_EFFICIENCY
from libra_des.hardware.collectives.nccl_tuner import NcclTuner
from libra_des.hardware.compute.kernels import BORROWED_GROUPED
from libra_des.hardware.profiles.profile import (
    GemmShape,
    Profile,
    Sample,
    TimeStats,
    load_profile,
    save_profile,
)

pytest.importorskip("torch", reason="the calibration harness needs torch (the calibrate extra)")

ROOT = Path(__file__).resolve().parents[1]
NCCL = ROOT.parent / "shared" / "data" / "nccl-tests-h200x8"
if str(ROOT) not in sys.path:  # `calibration` is a top-level folder, not an installed package
    sys.path.insert(0, str(ROOT))

from calibration import harness  # noqa: E402

OPS = harness.ALL_OPS


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    """(profile path, wall seconds) of one quick CPU run with every op (its speed is a
    benchmark figure, never asserted here)."""
    out = tmp_path_factory.mktemp("harness") / "cpu.json"
    argv = [sys.executable, "-m", "calibration.harness", "--out", str(out)]
    argv += ["--device", "cpu", "--world", "2", "--sizes", "quick", "--ops", ",".join(OPS)]
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    took = time.perf_counter() - t0
    assert done.returncode == 0, done.stderr[-2000:]
    return out, took


def validate_json(capsys: pytest.CaptureFixture[str], path: Path) -> list[dict[str, object]]:
    assert main(["validate", str(path), "--json"]) == 0
    return list(json.loads(capsys.readouterr().out)["ops"])


# ----------------------------------------------------------------------------- harness output


def test_harness_profile_has_every_op(cpu_run: tuple[Path, float]) -> None:
    path, _ = cpu_run
    prof = load_profile(path)
    assert prof.source == harness.SOURCE and prof.device.startswith("CPU")
    assert prof.software["torch"] and prof.software["distributed"] == "gloo"
    assert prof.name == "cpu" and prof.date[:2] == "20"
    assert {s.op for s in prof.samples} == set(OPS)
    for s in prof.samples:
        t = s.time
        assert t.min is not None and t.max is not None
        assert 0 < t.min <= t.median <= t.max
        assert s.source.startswith(harness.SOURCE)
    sizes = harness.SIZE_SETS[("cpu", "quick")]
    for op in harness.COLLECTIVES:
        got = [s for s in prof.samples if s.op == op]
        assert [s.nbytes for s in got] == [float(b) for b in sizes.coll_bytes]
        assert {(s.group, s.gpus_per_node) for s in got} == {(2, 2)}
    for s in prof.samples:
        if s.attention is not None:
            assert sum(n * c for n, c in s.attention.docs) == sizes.attn_tokens
            assert s.attention.heads_q in sizes.attn_heads
    grouped = [s for s in prof.samples if s.op == "grouped_gemm"]
    assert {s.group for s in grouped} == set(sizes.experts)


def test_harness_fits_every_fittable_op(cpu_run: tuple[Path, float]) -> None:
    prof = load_profile(cpu_run[0])
    fitted = {f.op for f in prof.fits}
    assert fitted == set(OPS)
    gemm = next(f for f in prof.fits if f.op == "gemm")
    assert gemm.dtype == "fp32" and gemm.n == len([s for s in prof.samples if s.op == "gemm"])
    # CPU peaks come from this run's probes, not the H200 datasheet the kernels start from.
    assert prof.peak_flops("fp32") < load_profile("h200-sxm").peak_flops("fp32")
    assert prof.interconnect.nvls_ops == ()


def test_validate_replays_every_sample(
    cpu_run: tuple[Path, float], capsys: pytest.CaptureFixture[str]
) -> None:
    prof = load_profile(cpu_run[0])
    rows = validate_json(capsys, cpu_run[0])
    assert {r["op"] for r in rows} == set(OPS)
    assert sum(int(str(r["n"])) for r in rows) == len(prof.samples)
    keys = {"op", "group", "gpus_per_node", "algorithm", "dtype", "kind", "n", "worst_case"}
    keys |= {f"{q}_abs_pct_error" for q in ("median", "p90", "worst")}
    for r in rows:
        assert keys <= set(r)
        med, p90, worst = (float(str(r[f"{q}_abs_pct_error"])) for q in ("median", "p90", "worst"))
        assert 0 <= med <= p90 <= worst
        assert r["kind"] == "in_sample"
    # In-sample replay through CostModel must reproduce the fitter's own errors.
    for f in prof.fits:
        row = next(r for r in rows if r["op"] == f.op)
        assert float(str(row["median_abs_pct_error"])) == pytest.approx(
            f.fit_median_abs_pct_error, abs=2e-3
        )


def test_validate_table_prints(
    cpu_run: tuple[Path, float], capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # wide enough that no column is dropped or folded
    assert main(["validate", str(cpu_run[0])]) == 0
    out = capsys.readouterr().out
    assert "grouped_gemm" in out and "in_sample" in out and "samples replayed" in out


# ----------------------------------------------------------------------------- validate


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], field: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {field}")


def test_validate_without_samples_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = save_profile(load_profile("h200-sxm"), tmp_path / "empty.json")
    one_line_error(capsys, ["validate", str(empty)], "profile.samples")
    one_line_error(capsys, ["validate", str(tmp_path / "missing.json")], "profile")
    (tmp_path / "bad.json").write_text("{not json")
    one_line_error(capsys, ["validate", str(tmp_path / "bad.json")], "profile")


def grouped_closed_form(m: int, experts: int, n: int, k: int, peak: float, hbm: float) -> float:
    """The grouped tile model by hand, with the borrowed constants (bf16, 132 SMs)."""
    c = BORROWED_GROUPED
    block_m = 64 if m <= 64 else 128
    tiles = experts * math.ceil(m / block_m) * math.ceil(n / 128)
    waves = tiles / 132 if tiles < 132 else math.ceil(tiles / 132)
    per_tile = 2 * block_m * 128 * k / (peak / 132 * c["efficiency"])
    compute = waves * per_tile + math.ceil(waves) * c["tile_s"]
    memory = 2 * (experts * k * n + experts * m * (k + n)) / (hbm * c["mem_eff"])
    p = c["overlap"]
    return c["launch_s"] + (compute**p + memory**p) ** (1 / p)


def closed_form_profile() -> Profile:
    """The H200 datasheet without fits, with samples timed by the closed forms themselves:
    GEMM roofline (launch + max(F (1 + (half/F)^gamma) / (peak eff), bytes / hbm)), a
    grouped GEMM by the borrowed tile constants (8 experts of m rows: tiles, waves over 132
    SMs, p-norm of MMA and HBM time), a 2-rank all_reduce by NCCL's tuning model (the
    datasheet tier of collectives) and a send_recv as alpha + S / B (efficiency 1, one hop
    latency)."""
    base = load_profile("h200-sxm").model_copy(update={"fits": ()})
    k = base.kernels
    eff, half, gamma = k.gemm_efficiency.value, k.gemm_half_flops.value, k.gemm_gamma.value
    launch, peak, hbm = k.launch_s.value, base.peak_flops("bf16"), base.hbm_bw

    def body(m: int, n: int, kk: int) -> float:
        flops = 2.0 * m * n * kk
        return max(
            flops * (1 + (half / flops) ** gamma) / (peak * eff),
            2 * (m * kk + kk * n + m * n) / hbm,
        )

    alpha, rate = base.interconnect.intra_latency.value, base.interconnect.intra_bw.value
    samples = []
    for m in (16, 256, 4096):
        shape = GemmShape(m=m, n=4096, k=2048)
        secs = launch + body(m, 4096, 2048)
        samples.append(Sample(op="gemm", gemm=shape, time=TimeStats(median=secs)))
        grouped = grouped_closed_form(m, 8, 4096, 2048, peak, hbm)
        samples.append(
            Sample(op="grouped_gemm", gemm=shape, group=8, time=TimeStats(median=grouped))
        )
    tuner = NcclTuner(base.interconnect.fabric(1), base.device, NIC_EFFICIENCY,
                      base.interconnect.nvls_ops)
    for size in (1e3, 1e6, 1e9):
        nccl = tuner.times("all_reduce", np.array([size]), 2, 2)
        assert nccl is not None
        for op, secs in (("all_reduce", float(nccl[0])), ("send_recv", alpha + size / rate)):
            t = TimeStats(median=secs)
            samples.append(Sample(op=op, nbytes=size, group=2, gpus_per_node=2, time=t))
    return base.with_samples(tuple(samples))


def test_validate_matches_closed_forms(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = save_profile(closed_form_profile(), tmp_path / "closed.json")
    rows = validate_json(capsys, path)
    assert {r["op"] for r in rows} == {"gemm", "grouped_gemm", "all_reduce", "send_recv"}
    for r in rows:
        assert r["kind"] == "predicted"  # no fits: datasheet and kernel constants only
        assert float(str(r["worst_abs_pct_error"])) < 1e-6, r


def test_validate_reproduces_fit_errors_on_nccl_tests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if not NCCL.is_dir():
        pytest.skip(f"{NCCL} is absent (the shared measurement data is not checked out)")
    out = tmp_path / "h200.json"
    logs = [str(p) for p in sorted(NCCL.glob("*.perf.txt"))]
    assert main(["profile", "import", "--format", "nccl-tests", *logs, "--out", str(out)]) == 0
    capsys.readouterr()
    prof = load_profile(out)
    rows = validate_json(capsys, out)
    assert len(rows) == len(prof.fits) == 6
    for f in prof.fits:
        row = next(r for r in rows if (r["op"], r["group"]) == (f.op, f.group))
        assert row["kind"] == "in_sample" and row["algorithm"] == f.algorithm
        assert float(str(row["median_abs_pct_error"])) == pytest.approx(
            f.fit_median_abs_pct_error, abs=2e-3
        )


# ----------------------------------------------------------------------------- harness pieces


@settings(max_examples=30, deadline=None)
@given(total=st.integers(64, 1 << 16), floor=st.sampled_from([16, 32, 64]), seed=st.integers(0, 99))
def test_tailed_mix_sums_to_total(total: int, floor: int, seed: int) -> None:
    docs = harness.tailed_mix(total, floor, np.random.default_rng(seed))
    assert sum(n * c for n, c in docs) == total
    assert all(n >= 1 and c >= 1 for n, c in docs)
    assert docs == harness.tailed_mix(total, floor, np.random.default_rng(seed))


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["--ops", "attention,nope"], "--ops"),
        (["--sizes", "huge"], "--sizes"),
        (["--device", "tpu"], "--device"),
        (["--device", "cpu", "--world", "1", "--ops", "all_reduce"], "--world"),
    ],
)
def test_harness_bad_input_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], field: str
) -> None:
    assert harness.main(["--out", str(tmp_path / "x.json"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {field}")
    assert not (tmp_path / "x.json").exists()
