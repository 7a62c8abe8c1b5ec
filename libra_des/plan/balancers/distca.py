"""DistCA: TAP's tiles and placement over one pool of all DP replicas, always pipelined."""

from libra_des.plan.balancers.planners import tap, tap_many
from libra_des.plan.balancers.registry import TrainingBalancer

BALANCER = TrainingBalancer(
    name="distca", pool="all", attention=tap, always_pipelines=True, runs_tap=True,
    attention_many=tap_many,
)
