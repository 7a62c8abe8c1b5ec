"""SGLang: static expert placement, All2All dispatch, no replicas, no planning."""

from __future__ import annotations

import numpy as np

from libra_des.plan.moe import systems
from libra_des.plan.moe.assignment import MoeLayerPlan
from libra_des.plan.moe.registry import MoeCapabilities, MoeSystem, PlanInputs
from libra_des.plan.moe.systems import MoeSetup


def plan(routed: np.ndarray, origin: np.ndarray, setup: MoeSetup, _: PlanInputs) -> MoeLayerPlan:
    return systems.sglang_plan(routed, origin, setup)


SYSTEM = MoeSystem("sglang", "SGLang", MoeCapabilities(), plan)
