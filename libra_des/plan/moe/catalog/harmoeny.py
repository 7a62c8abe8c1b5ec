"""HarMoEny: CPU token moves on the exact routing, missing weights fetched from host memory."""

from __future__ import annotations

import numpy as np

from libra_des.plan.moe import systems
from libra_des.plan.moe.assignment import MoeLayerPlan
from libra_des.plan.moe.registry import MoeCapabilities, MoeSystem, PlanInputs
from libra_des.plan.moe.systems import MoeSetup


def plan(routed: np.ndarray, origin: np.ndarray, setup: MoeSetup, x: PlanInputs) -> MoeLayerPlan:
    return systems.harmoeny_plan(routed, origin, setup, x.timer)


SYSTEM = MoeSystem(
    "harmoeny", "HarMoEny",
    MoeCapabilities(fetch=True, cpu_plan=True, memory_slots=True),
    plan,
)
