"""Grouped-GEMM fits per shape family: residuals recomputed from the public tables, the fit a
model's shape picks, and the extrapolation flag the results carry."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from libra_des.config import load_scenario
from libra_des.hardware.compute.grouped_kernels import KERNELS
from libra_des.results.moe_metrics import simulate_moe

ROOT = Path(__file__).resolve().parents[1]
FITS = [(name, i) for name, k in KERNELS.items() for i in range(len(k.fits))]


def fit_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("moe_kernel_fit",
                                                  ROOT / "benchmarks" / "moe_kernel_fit.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["moe_kernel_fit"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize(("name", "index"), FITS)
def test_each_fit_reproduces_its_points_within_its_stated_residuals(name: str,
                                                                     index: int) -> None:
    mod = fit_module()
    kernel = KERNELS[name]
    fit = kernel.fits[index]
    res = mod.residuals(kernel, fit)
    points, median, worst = mod.summary(res)
    assert points == fit.points
    assert worst <= fit.max_error
    assert abs(median - fit.median_error) <= 1e-3


def test_the_narrow_triton_fit_misses_the_decode_calls_it_leaves_out() -> None:
    """The prefill restriction matters: below 256 tokens the same constants are far off."""
    mod = fit_module()
    kernel = KERNELS["triton_fused_moe"]
    res = mod.residuals(kernel, kernel.fits[0])
    outside = [abs(r.error) for r in res if not r.fitted]
    assert max(outside) > kernel.fits[0].max_error


def test_a_shape_outside_the_fits_is_flagged_extrapolated() -> None:
    triton = KERNELS["triton_fused_moe"]
    inside = triton.choose(4096, 1536)  # Qwen3-235B-A22B: bracketed by 2816-4096, 704-7168
    assert not inside.extrapolated and inside.distance_octaves > 0
    far = triton.choose(16384, 1536)
    assert far.extrapolated and far.distance_octaves > 2
    exact = triton.choose(4096, 7168)
    assert exact.fit.family == "h4096-i7168" and exact.distance_octaves == 0
    assert not exact.extrapolated
    assert KERNELS["deepgemm_fp8"].choose(4096, 1536).extrapolated


def test_a_run_reports_the_fit_of_each_expert_stage() -> None:
    scen = load_scenario(ROOT / "scenarios" / "moe-glm45.yaml",
                         ["model.layers=4", "workload.batches=1", "workload.batch=4"])
    r = simulate_moe(scen, np.random.default_rng(0))
    want = KERNELS["triton_fused_moe"].choose(5120, 1536)
    for stage in ("moe_local", "moe_remote"):
        got = r["grouped_fit"][stage]
        assert got["family"] == want.fit.family
        assert got["extrapolated"] is True  # hidden 5120 lies beyond the fitted 4096
        assert got["distance_octaves"] == pytest.approx(want.distance_octaves, abs=1e-4)


def test_the_coster_prices_with_the_fit_its_shape_picks() -> None:
    """Qwen3-30B-A3B in FP8 on the Triton FP8 kernel: its own shape's fit (distance 0), and the
    experts cost what that fit's constants give, not the kernel's other fits'."""
    from libra_des.hardware.costs import CostModel
    from libra_des.hardware.fabric.topology import load_topology
    from libra_des.hardware.profiles.profile import load_profile
    from libra_des.sim.moe.costs import StageCoster

    sc = load_scenario(ROOT / "scenarios" / "paper-moe-breakdown.yaml",
                       ["model=qwen3-30b-a3b", "model.dtype=fp8", "model.layers=2"])
    fabric = load_topology(sc.topology, sc.topology_params).fabric()
    cost = CostModel(load_profile(sc.profile), fabric)
    rows = np.full((1, 128), 256.0)
    triton = StageCoster(cost, fabric, sc.model, 8, KERNELS["triton_fused_moe_fp8"])
    assert triton.fit is not None and triton.fit.distance_octaves == 0
    assert triton.fit_report()["moe_local"]["extrapolated"] is False
    deepgemm = StageCoster(cost, fabric, sc.model, 8, KERNELS["deepgemm_fp8"])
    assert deepgemm.fit_report()["moe_local"]["extrapolated"] is True
    # 11.5% of the FP8 peak against DeepGEMM's 73%: the Triton FP8 experts take longer.
    assert triton.experts_per_gpu(rows)[0] > 2 * deepgemm.experts_per_gpu(rows)[0]
