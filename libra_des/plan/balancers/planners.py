"""Attention planners the shipped balancers share: Ulysses per replica, TAP per pool."""

from __future__ import annotations

import numpy as np

from libra_des.config import TrainingScenario as Scenario
from libra_des.errors import InputError
from libra_des.plan.balancers.balancer import pipeliner_chunks_of
from libra_des.plan.baselines import ulysses_plan
from libra_des.plan.tap import TileLayout, plan_pool
from libra_des.plan.tile_batch import attention_plans, batches
from libra_des.plan.types import AttentionPlan


def ulysses_heads(scenario: Scenario) -> None:
    """Ulysses gives each CP rank ``heads_q / cp`` query heads: ``cp`` must divide them."""
    heads, cp = scenario.model.heads_q, scenario.parallelism.cp
    if heads % cp:
        raise InputError("parallelism.cp", cp, f"a divisor of model.heads_q={heads} "
                         f"(balancer.policy={scenario.balancer.policy} shards heads, Ulysses)")


def ulysses_padded(scenario: Scenario, seqs: list[np.ndarray]) -> AttentionPlan:
    """Ulysses on a fixed-length packed sequence: every sequence padded to L and moved so."""
    par = scenario.parallelism
    return ulysses_plan(seqs[0], cp=par.cp, model=scenario.model,
                        packed_length=scenario.workload.packed_length)


def ulysses_real(scenario: Scenario, seqs: list[np.ndarray]) -> AttentionPlan:
    """Ulysses on a variable-length microbatch: its real tokens are moved."""
    return ulysses_plan(seqs[0], cp=scenario.parallelism.cp, model=scenario.model,
                        packed_length=None)


def tap(scenario: Scenario, seqs: list[np.ndarray], always_pipelines: bool = False
        ) -> AttentionPlan:
    """TAP over one pool's sequences (``always_pipelines``: the balancer's flag of that name,
    bound by a balancer that always pipelines)."""
    return plan_pool(seqs, **tap_settings(scenario, always_pipelines)).attention


def tap_many(scenario: Scenario, pools: list[list[np.ndarray]], always_pipelines: bool = False
             ) -> list[AttentionPlan]:
    """:func:`tap` for every pool, their tiles built a batch of pools at a time (same plans;
    only the attention plans are kept, as :func:`tap` keeps them)."""
    settings = tap_settings(scenario, always_pipelines)
    return [plan for batch in batches(pools) for plan in attention_plans(batch, **settings)]


def tap_settings(scenario: Scenario, always_pipelines: bool = False) -> TapSettings:
    """The scenario's TAP knobs and pool layout, as :func:`plan_pool` takes them."""
    bal = scenario.balancer
    heads_split, block_size = bal.tap_knobs()
    return TapSettings(
        cp=scenario.parallelism.cp,
        model=scenario.model,
        heads_split=heads_split,
        block_size=block_size,
        packed_length=scenario.workload.packed_length,
        slack=bal.slack,
        chunks=pipeliner_chunks_of(bal, always_pipelines),
        policy=bal.policy,
    )


class TapSettings(TileLayout):
    """:class:`TileLayout` and the pool planner's other knobs."""

    slack: float
    chunks: int
    policy: str
