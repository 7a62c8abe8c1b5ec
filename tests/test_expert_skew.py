"""Training MoE layers pay for routing skew (expert loads from the routing model)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from libra_des.config import ROOT, RoutingSpec, load_scenario
from libra_des.kinds.simulation import simulate
from libra_des.workload.expert_load import expected_loads, rank_loads

SMALL = ["parallelism.dp=2", "parallelism.cp=4", "parallelism.pp=1", "parallelism.gbs=4",
         "balancer.pool_size=2", "model.layers=4", "workload=longctx-256k", "steps=1",
         "balancer.heads_split=4", "balancer.block_size=16384", "variance.enabled=false",
         "topology_params.nodes=2"]  # DP groups one per node (until the layout fix lands)


def step(extra: list[str]) -> dict[str, Any]:
    sc = load_scenario(ROOT / "scenarios" / "quickstart.yaml", [*SMALL, *extra])
    return simulate(sc)[0]


def test_expected_loads_are_top_k_distinct_copies() -> None:
    model = load_scenario(ROOT / "scenarios" / "quickstart.yaml").model
    loads = expected_loads(model, RoutingSpec())
    assert loads.shape == (model.layers, model.experts)
    assert np.allclose(loads.sum(axis=1), model.top_k)
    assert loads.min() >= 0 and loads.max() <= 1 + 1e-12  # one copy per token at most
    ranks = rank_loads(loads, 8).sum(axis=-1)
    assert (ranks.max(axis=1) / ranks.mean(axis=1)).min() > 1.0  # skew at skew = 1
    flat = expected_loads(model, RoutingSpec(skew=0.0))
    assert np.allclose(flat, model.top_k / model.experts)


def test_skew_costs_time_and_uniform_routing_equals_balanced() -> None:
    skewed = step([])["step_time_s"]["mean"]
    balanced = step(["workload.expert_skew=false"])["step_time_s"]["mean"]
    uniform = step(["workload.routing.skew=0"])["step_time_s"]["mean"]
    assert skewed > balanced
    assert uniform == pytest.approx(balanced, rel=1e-12)
