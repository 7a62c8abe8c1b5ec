"""EPLB: redundant experts laid out once from a profiling sample (static replication)."""

from __future__ import annotations

import numpy as np

from libra_des.plan.moe import systems
from libra_des.plan.moe.assignment import MoeLayerPlan
from libra_des.plan.moe.registry import MoeCapabilities, MoeSystem, PlanInputs
from libra_des.plan.moe.systems import MoeSetup


def plan(routed: np.ndarray, origin: np.ndarray, setup: MoeSetup, x: PlanInputs) -> MoeLayerPlan:
    assert x.layout is not None
    return systems.eplb_plan(routed, origin, setup, x.layout)


SYSTEM = MoeSystem("eplb", "EPLB", MoeCapabilities(replication="static"), plan)
