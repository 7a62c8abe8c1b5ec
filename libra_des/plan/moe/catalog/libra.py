"""Libra: lookahead prediction, locality-aware prefetched replicas, CPU sharding, two stages."""

from __future__ import annotations

import numpy as np

from libra_des.plan.moe import systems
from libra_des.plan.moe.assignment import MoeLayerPlan
from libra_des.plan.moe.registry import MoeCapabilities, MoeSystem, PlanInputs
from libra_des.plan.moe.systems import MoeSetup


def plan(routed: np.ndarray, origin: np.ndarray, setup: MoeSetup, x: PlanInputs) -> MoeLayerPlan:
    assert x.predicted is not None
    return systems.libra_plan(routed, origin, x.predicted, setup, x.timer)


SYSTEM = MoeSystem(
    "libra", "Libra",
    MoeCapabilities(predictor="lookahead", replication="dynamic", prefetch=True, cpu_plan=True,
                    two_stage=True, memory_slots=True, dispatch="allgather"),
    plan,
)
