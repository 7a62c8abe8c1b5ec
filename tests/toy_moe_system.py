"""A toy MoE system, registered at import: the whole of what adding a system takes.

"toy" keeps SGLang's static placement (every pair on its expert's home GPU) but declares a
CPU planning step, so its layers gain the host plan and metadata stages of the layer builder.
"""

from __future__ import annotations

import numpy as np

from libra_des.plan.moe.assignment import MoeLayerPlan
from libra_des.plan.moe.registry import MoeCapabilities, MoeSystem, PlanInputs, register
from libra_des.plan.moe.systems import MoeSetup, expert_totals, finish


def plan(routed: np.ndarray, origin: np.ndarray, setup: MoeSetup, _: PlanInputs) -> MoeLayerPlan:
    load = setup.home * expert_totals(routed, setup.shape[1])[None, :]
    return finish("toy", routed, origin, setup, setup.home, np.zeros_like(setup.home), load)


SYSTEM = register(MoeSystem("toy", "Toy", MoeCapabilities(cpu_plan=True), plan))
