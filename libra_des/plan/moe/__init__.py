"""MoE expert-parallel plans (docs/model.md B): EPLB, Lina, Libra replication + sharding, HarMoEny.

Pure numpy functions; a layer's plan is a frozen :class:`MoeLayerPlan`.
"""

from libra_des.plan.moe.assignment import MoeLayerPlan, static_home
from libra_des.plan.moe.eplb import rebalance_experts
from libra_des.plan.moe.systems import (
    MoeSetup,
    eplb_plan,
    harmoeny_plan,
    libra_plan,
    lina_plan,
    sglang_plan,
)

__all__ = [
    "MoeLayerPlan",
    "MoeSetup",
    "eplb_plan",
    "harmoeny_plan",
    "libra_plan",
    "lina_plan",
    "rebalance_experts",
    "sglang_plan",
    "static_home",
]
