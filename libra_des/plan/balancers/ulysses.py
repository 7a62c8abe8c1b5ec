"""Ulysses: one pipeline per DP replica, fixed-length packing (padded to L), no pooling."""

from libra_des.plan.balancers.balancer import TrainingBalancer
from libra_des.plan.balancers.planners import ulysses_heads, ulysses_padded

BALANCER = TrainingBalancer(name="ulysses", pool="replica", attention=ulysses_padded,
                           check=ulysses_heads)
