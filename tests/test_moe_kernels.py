"""Grouped-GEMM kernels as the systems ship them: BF16 Triton fused MoE, FP8 DeepGEMM."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from libra_des.cli import main
from libra_des.config import load_scenario
from libra_des.hardware import costs as costs_module
from libra_des.hardware.compute import grouped_kernels
from libra_des.hardware.compute.grouped_kernels import KERNELS, grouped_kernel
from libra_des.hardware.costs import CostModel
from libra_des.hardware.fabric.topology import load_topology
from libra_des.hardware.profiles.profile import load_profile
from libra_des.plan.moe.registry import BUILTIN
from libra_des.results.moe_metrics import simulate_moe
from libra_des.sim.moe.costs import StageCoster

REPO = Path(__file__).resolve().parents[1]
BREAKDOWN = REPO / "scenarios" / "paper-moe-breakdown.yaml"
SMALL = ["model.layers=3", "workload.batches=1", "workload.batch=8", "variance.enabled=false"]


def run(*extra: str) -> dict[str, Any]:
    return simulate_moe(load_scenario(BREAKDOWN, [*SMALL, *extra]), np.random.default_rng(0))


class Untouchable(dict[str, float]):
    """A constants table that fails the test when anything reads it."""

    def __getitem__(self, key: str) -> float:
        raise AssertionError(f"the FP8 table was read ({key})")

    def get(self, key: str, default: Any = None) -> Any:
        raise AssertionError(f"the FP8 table was read ({key})")


class Poisoned:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the FP8 kernel was read ({name})")


@pytest.mark.parametrize("system", BUILTIN)
def test_a_bf16_run_never_reads_the_fp8_table(system: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(grouped_kernels.KERNELS, "deepgemm_fp8", Poisoned())  # type: ignore[arg-type]
    monkeypatch.setattr(costs_module, "BORROWED_GROUPED", Untouchable())
    r = run(f"balancer.policy={system}")
    assert r["grouped_kernel"] == "triton_fused_moe"
    assert r["moe_layer_s"] > 0


def test_fp8_changes_the_gemm_model() -> None:
    bf16, fp8 = run(), run("model.dtype=fp8")
    assert fp8["grouped_kernel"] == "deepgemm_fp8"
    # FP8's peak is twice BF16's and its weights half the bytes: the experts run faster.
    assert fp8["layer_breakdown_s"]["moe_local"]["exposed"] + \
        fp8["layer_breakdown_s"]["moe_remote"]["exposed"] < \
        bf16["layer_breakdown_s"]["moe_local"]["exposed"] + \
        bf16["layer_breakdown_s"]["moe_remote"]["exposed"]
    # The replica copies move FP8 weights: half the bytes.
    assert fp8["bytes_moved"]["replica_copy"] < bf16["bytes_moved"]["replica_copy"]


def test_unknown_dtype_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["run", str(BREAKDOWN), "--out", "/nonexistent/never", "--set", "model.dtype=int4"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "model.dtype" in err[0] and "int4" in err[0]


def test_a_kernel_of_another_dtype_is_refused() -> None:
    from libra_des.errors import InputError

    with pytest.raises(InputError):
        grouped_kernel("deepgemm_fp8", "bf16")
    assert {k.dtype for k in KERNELS.values()} == {"bf16", "fp8"}


def test_a_gpu_with_more_tokens_per_expert_runs_at_its_own_m() -> None:
    """Skew: each GPU's launch is priced from its own rows (tile height, waves), so time per
    token falls on the GPU whose experts got more tokens, and each GPU's time equals its launch
    priced alone."""
    sc = load_scenario(BREAKDOWN, SMALL)
    fabric = load_topology(sc.topology, sc.topology_params).fabric()
    cost = CostModel(load_profile(sc.profile), fabric)
    coster = StageCoster(cost, fabric, sc.model, 2, KERNELS["triton_fused_moe"])
    rows = np.zeros((2, 128))
    rows[0, :16] = 32  # a cold GPU: 32 tokens per expert
    rows[1, 16:32] = 1024  # a hot GPU: 1024 tokens per expert
    both = coster.experts_per_gpu(rows)
    alone = [coster.experts_per_gpu(rows[g:g + 1])[0] for g in range(2)]
    assert both == pytest.approx(alone, rel=1e-12)
    per_token = both / rows.sum(axis=1)
    assert per_token[1] < per_token[0] / 3  # weight reads amortised over 32x more rows
    h, f = sc.model.hidden, sc.model.expert_ffn or sc.model.hidden
    flops = 2 * 3 * h * f * rows.sum(axis=1)
    assert np.all(flops / both < cost.profile.peak_flops("bf16"))  # never above peak
