"""Ulysses: one pipeline per DP replica, fixed-length packing (padded to L), no pooling."""

from libra_des.plan.balancers.planners import ulysses_heads, ulysses_padded
from libra_des.plan.balancers.registry import TrainingBalancer

BALANCER = TrainingBalancer(name="ulysses", pool="replica", attention=ulysses_padded,
                           check=ulysses_heads)
