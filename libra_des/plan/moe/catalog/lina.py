"""Lina: path-table prediction on the CPU, replicas prefetched into expert slots."""

from __future__ import annotations

import numpy as np

from libra_des.plan.moe import systems
from libra_des.plan.moe.assignment import MoeLayerPlan
from libra_des.plan.moe.registry import MoeCapabilities, MoeSystem, PlanInputs
from libra_des.plan.moe.systems import MoeSetup


def plan(routed: np.ndarray, origin: np.ndarray, setup: MoeSetup, x: PlanInputs) -> MoeLayerPlan:
    assert x.predicted is not None
    return systems.lina_plan(routed, origin, x.predicted, setup)


SYSTEM = MoeSystem(
    "lina", "Lina",
    MoeCapabilities(predictor="lina", replication="dynamic", prefetch=True, memory_slots=True),
    plan,
)
