"""A toy training balancer from outside the package: it only registers itself.

"toy_real": one pipeline per DP replica running Ulysses on the packed sequence's real tokens
(no padding moved), linear layers still on the padded length. Importing this module is all it
takes for scenarios to name it (``balancer.policy=toy_real``); a third-party package would do
the same from an entry point of the group ``libra_des.balancers``.
"""

from __future__ import annotations

import numpy as np

from libra_des.config import Scenario
from libra_des.plan.balancers.registry import TrainingBalancer, register
from libra_des.plan.baselines import ulysses_plan
from libra_des.plan.types import AttentionPlan


def real_tokens(scenario: Scenario, seqs: list[np.ndarray]) -> AttentionPlan:
    """Ulysses over the slot's one sequence, moving its real tokens only."""
    return ulysses_plan(seqs[0], cp=scenario.parallelism.cp, model=scenario.model)


BALANCER = register(TrainingBalancer(name="toy_real", pool="replica", attention=real_tokens))
