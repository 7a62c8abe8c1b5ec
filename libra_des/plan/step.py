"""One optimizer step's plan: which packed sequence runs where, and each pool's attention plan.

This is the training-side composition of the planners (pure, no SimPy): draw a GBS window,
group it into pools (VRSP or arrival order), and build one :class:`AttentionPlan` per
(pipeline, microbatch slot). A *pipeline* is the simulated entity: a Libra pool group (P DP
replicas moving in lockstep at every pooled attention), one DP replica for Ulysses and WLB-LLM,
or all DP replicas for DistCA.

Slot layout follows VRSP step 6 (GA-major, pool-minor): pool ``j`` of the step runs as
microbatch ``j // E`` on pipeline ``j % E``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np

from libra_des.config import TrainingScenario as Scenario
from libra_des.plan.attention import causal_pairs
from libra_des.plan.balancers import registry as training_balancers
from libra_des.plan.balancers.balancer import pipeliner_chunks_of
from libra_des.plan.grouping import vrsp
from libra_des.plan.types import AttentionPlan
from libra_des.workload.packing import CorpusStream, PackedBatch


@dataclass(frozen=True)
class StepPlan:
    """Everything the training simulation executes for one step (data only)."""

    policy: str
    window: PackedBatch
    pipelines: int
    pool_size: int
    microbatches: int
    slots: tuple[tuple[AttentionPlan, ...], ...]
    seq_of: np.ndarray
    inter_pool_imbalance: float
    intra_pool_imbalance: float
    planned_pair_heads: float
    plan_seconds: float
    changes_step_samples: bool = False
    deferred: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    kept_tiles: int = -1  # the tile count once ``slots`` are dropped (see without_slots)

    @property
    def tokens(self) -> int:
        """Real (unpadded) tokens of the step."""
        return int(self.window.lengths.sum())

    @property
    def tiles(self) -> int:
        if self.kept_tiles >= 0:
            return self.kept_tiles
        return sum(p.tiles for row in self.slots for p in row)

    def without_slots(self) -> StepPlan:
        """This plan once its step ran: the per-slot attention plans (about 3 KB per GPU)
        dropped, the summary figures kept."""
        return replace(self, slots=(), kept_tiles=self.tiles)


def balancer_of(scenario: Scenario) -> training_balancers.TrainingBalancer:
    """The registered balancer the scenario names (see :mod:`libra_des.plan.balancers.registry`)."""
    return training_balancers.get(scenario.balancer.policy)


def pool_size_of(scenario: Scenario) -> int:
    """P: replicas per pool (1 for the per-replica baselines, DP for DistCA)."""
    return balancer_of(scenario).pool_size(scenario.balancer, scenario.parallelism.dp)


def draw_window(
    scenario: Scenario, stream: CorpusStream, queue: np.ndarray
) -> tuple[PackedBatch, bool, np.ndarray]:
    """The step's GBS packed sequences; WLB-LLM repacks the same raw samples its own way.

    Returns (window, changes_step_samples, samples WLB-LLM deferred to the next step).
    """
    window = stream.next_window(scenario.parallelism.gbs)
    packer = balancer_of(scenario).packer
    if packer is None:
        return window, False, np.zeros(0, dtype=np.int64)
    return packer(scenario, window, queue)


def pool_order(scenario: Scenario, weights: np.ndarray, pool: int) -> np.ndarray:
    """Sequence indices in slot order (GA-major, pool-minor), grouped P at a time."""
    if balancer_of(scenario).vrsp and scenario.balancer.vrsp:
        return vrsp(weights, pool).step_order()
    # Arrival order: consecutive sequences form a pool (TAP alone, baselines).
    return np.arange(weights.shape[0])


def inter_pool(weights: np.ndarray, order: np.ndarray, pool: int) -> float:
    """R - 1 over the step's pools, R = max pool load / mean pool load (Σ l² proxy)."""
    loads = weights[order].reshape(-1, pool).sum(axis=1)
    mean = float(loads.mean())
    return float(loads.max()) / mean - 1.0 if mean > 0 else 0.0


def pipeliner_chunks(scenario: Scenario) -> int:
    """M: the Pipeliner's chunks (1 when it is off; DistCA always pipelines)."""
    return pipeliner_chunks_of(scenario.balancer, balancer_of(scenario).always_pipelines)


def attention_plan(scenario: Scenario, seqs: list[np.ndarray]) -> AttentionPlan:
    """The balancer's attention plan for one slot (one pool's sequences)."""
    return balancer_of(scenario).attention(scenario, seqs)


def attention_plans(scenario: Scenario, pools: list[list[np.ndarray]]) -> list[AttentionPlan]:
    """:func:`attention_plan` of every pool, in order (one call where the balancer plans many
    pools at once, the same plans)."""
    balancer = balancer_of(scenario)
    if balancer.attention_many is not None:
        return balancer.attention_many(scenario, pools)
    return [balancer.attention(scenario, seqs) for seqs in pools]


def build_step_plan(
    scenario: Scenario, stream: CorpusStream, queue: np.ndarray | None = None
) -> StepPlan:
    """Draw the next window and plan it for the scenario's balancer.

    ``queue``: samples WLB-LLM deferred in the previous step (its outlier-deferral queue).
    """
    t0 = time.perf_counter()
    par = scenario.parallelism
    pool = pool_size_of(scenario)
    pipelines = par.dp // pool
    pending = np.zeros(0, dtype=np.int64) if queue is None else queue
    window, changed, deferred = draw_window(scenario, stream, pending)
    weights = window.sum_sq()
    order = pool_order(scenario, weights, pool)
    seq_of = order.reshape(par.microbatches, pipelines, pool).transpose(1, 0, 2)
    pools = [[window.seq(int(i)) for i in seq_of[e, m]]
             for e in range(pipelines) for m in range(par.microbatches)]
    plans = iter(attention_plans(scenario, pools))
    slots = tuple(tuple(next(plans) for _m in range(par.microbatches)) for _e in range(pipelines))
    planned = float(causal_pairs(window.lengths)) * scenario.model.heads_q
    intra = float(np.mean([p.imbalance for row in slots for p in row]))
    return StepPlan(
        policy=scenario.balancer.policy,
        window=window,
        pipelines=pipelines,
        pool_size=pool,
        microbatches=par.microbatches,
        slots=slots,
        seq_of=seq_of,
        inter_pool_imbalance=inter_pool(weights, order, pool),
        intra_pool_imbalance=intra,
        planned_pair_heads=planned,
        plan_seconds=time.perf_counter() - t0,
        changes_step_samples=changed,
        deferred=deferred,
    )
