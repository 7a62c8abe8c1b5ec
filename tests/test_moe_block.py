"""The whole prefill block: every kernel outside the routed experts is priced, traced and
reported, each from its bytes or FLOPs on the profile's roofline."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from libra_des.config import load_scenario
from libra_des.hardware.costs import CostModel
from libra_des.hardware.fabric.topology import load_topology
from libra_des.hardware.profiles.profile import load_profile
from libra_des.plan.moe.registry import BUILTIN
from libra_des.results.moe_metrics import simulate_moe
from libra_des.results.trace_moe import moe_trace
from libra_des.sim.moe.block import NON_EXPERT, elementwise_bytes
from libra_des.sim.moe.costs import StageCoster, batch_shape

REPO = Path(__file__).resolve().parents[1]
BREAKDOWN = REPO / "scenarios" / "paper-moe-breakdown.yaml"
GLM = REPO / "scenarios" / "moe-glm45.yaml"
SMALL = ["model.layers=5", "workload.batches=1", "workload.batch=8", "variance.enabled=false"]


def coster(path: Path) -> tuple[StageCoster, CostModel]:
    sc = load_scenario(path, SMALL)
    fabric = load_topology(sc.topology, sc.topology_params).fabric()
    cost = CostModel(load_profile(sc.profile), fabric)
    return StageCoster(cost, fabric, sc.model, 8), cost


def test_memory_bound_kernels_follow_their_bytes() -> None:
    """Closed form: a norm over T tokens reads and writes 4 T hidden rows, priced at the
    profile's element-wise rate plus one launch gap."""
    c, cost = coster(BREAKDOWN)
    m = c.model
    tokens = np.full(8, 1024)
    shape = batch_shape(np.full(8, 1024), np.repeat(np.arange(8), 1024), 8, 1)
    block = c.block(shape)
    k = cost.profile.kernels
    rate = cost.profile.hbm_bw * k.elementwise_efficiency.value
    want = k.launch_s.value + 4 * 1024 * m.hidden * m.dtype_bytes / rate
    assert block.seconds["residual_norm_attn"] == pytest.approx(np.full(8, want), rel=1e-12)
    moved = elementwise_bytes(tokens, m.hidden, m.dtype_bytes, m.top_k, m.experts, m.heads_q,
                              m.heads_kv, m.head_dim)
    assert moved["permute"][0] == pytest.approx(1024 * m.hidden * 2 * (1 + m.top_k))
    assert set(block.seconds) == set(NON_EXPERT)
    assert all(np.all(v >= 0) and np.all(np.isfinite(v)) for v in block.seconds.values())
    assert np.all(block.seconds["shared_experts"] == 0)  # Qwen3-235B has none
    glm, _ = coster(GLM)
    assert np.all(glm.block(shape).seconds["shared_experts"] > 0)  # GLM-4.5 has one


def test_every_kernel_is_in_the_breakdown_and_the_trace() -> None:
    timeline: list[tuple[int, int, str, int | None, float, float]] = []
    sc = load_scenario(GLM, SMALL)
    r = simulate_moe(sc, np.random.default_rng(0), timeline=timeline)
    names = {t[2] for t in timeline}
    for kernel in NON_EXPERT:
        assert kernel in names
        assert r["layer_breakdown_s"][kernel]["exposed"] > 0.0
    trace = moe_trace(timeline, sc, 8)
    spans = {e["name"].split(" L")[0] for e in trace["traceEvents"] if e.get("ph") == "X"}
    assert set(NON_EXPERT) <= spans
    exposed = sum(v["exposed"] for v in r["layer_breakdown_s"].values())
    assert exposed == pytest.approx(r["moe_layer_s"], rel=1e-9)


@pytest.mark.parametrize("system", BUILTIN)
def test_non_expert_share_is_a_fraction_reported_per_system(system: str) -> None:
    r = simulate_moe(load_scenario(BREAKDOWN, [*SMALL, f"balancer.policy={system}"]),
                     np.random.default_rng(0))
    outside = sum(r["layer_breakdown_s"][k]["exposed"] for k in NON_EXPERT)
    assert 0.0 < r["non_expert_share"] < 1.0
    assert r["non_expert_share"] == pytest.approx(outside / r["moe_layer_s"], rel=1e-9)
