"""Libra: pools of ``balancer.pool_size`` replicas grouped by VRSP, TAP inside each pool."""

from libra_des.plan.balancers.balancer import TrainingBalancer
from libra_des.plan.balancers.planners import tap, tap_many

BALANCER = TrainingBalancer(
    name="libra", pool="configured", attention=tap, vrsp=True, runs_tap=True,
    attention_many=tap_many,
)
