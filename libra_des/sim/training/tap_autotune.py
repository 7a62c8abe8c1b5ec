"""TAP's head split H and block size B chosen by the configuration simulator (docs/model.md A).

The paper picks its TAP settings by replaying the planners over GBS windows with the cost
model. Here, for every candidate (H, B) the pools of a window are planned by TAP
(:func:`libra_des.plan.tap.plan_pool`, unchanged; their tiles built in one pass,
:func:`libra_des.plan.tile_batch.plan_pools`) and costed with the cost model: the
predicted attention time of a pool is the slowest worker's Pipeliner makespan of the forward
plus the backward (compute imbalance and exposed exchange both show up in it), and a
candidate's score is the mean over the replayed pools. The lowest score among the candidates
whose remote buffers fit in memory (the caller's memory model decides) wins; ties go to the
smaller H, then the larger B (fewer tiles: less planning and fewer kernel calls).

Assumptions (ours): no runtime noise in the prediction; the backward moves dO and returns
dQ, dK, dV along the reverse of the forward's exchange (the remote inputs kept); the grid is
every H that divides ``heads_q`` with ``M | heads_q / H`` and every B from 4K tokens doubling
up to ``L / cp`` (one worker's shard), at most 64K; the replayed pools are the heaviest,
the median and the lightest of the window by attention load (Σ l²), the spread the plan must
handle, at a fraction of the cost of planning every pool for every candidate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from libra_des.config import ModelSpec
from libra_des.config import TrainingScenario as Scenario
from libra_des.hardware.collectives.a2a_batch import all_to_allv_batch
from libra_des.hardware.costs import CostModel
from libra_des.plan.step import (
    balancer_of,
    pipeliner_chunks,
    pool_order,
    pool_size_of,
)
from libra_des.plan.tap import pipelined_time
from libra_des.plan.tile_batch import plan_pools
from libra_des.plan.types import AttentionPlan
from libra_des.workload.packing import PackedBatch

#: Smallest and largest block sizes tried (our choice: below 4K tokens kernels get short and
#: tile counts make planning slow; above 64K tiles exceed a worker's fair share).
MIN_BLOCK, MAX_BLOCK = 4096, 65536


@dataclass(frozen=True)
class Candidate:
    """One (H, B) setting and what the cost model predicts for it."""

    heads_split: int
    block_size: int
    predicted_s: float  # mean over replayed pools of forward + backward attention per layer
    compute_s: float  # mean over pools of the slowest worker's compute (fwd + bwd)
    exposed_s: float  # predicted_s - mean compute: exposed exchange and imbalance wait
    imbalance: float  # mean intra-pool R - 1 after TAP
    exchange_bytes: float  # mean forward exchange bytes per layer and pool
    remote_bytes: float  # largest worker's held remote buffers of one layer (memory model)
    fits: bool = True  # whether the run's peak memory fits with these buffers


@dataclass(frozen=True)
class Ranking:
    """Every candidate, best first, and the choice."""

    candidates: tuple[Candidate, ...]

    @property
    def best(self) -> Candidate:
        return self.candidates[0]

    def as_dict(self) -> dict[str, Any]:
        return {
            "heads_split": self.best.heads_split,
            "block_size": self.best.block_size,
            "ranking": [asdict(c) for c in self.candidates],
        }


def grid(model: ModelSpec, chunks: int, shard_tokens: int) -> list[tuple[int, int]]:
    """Candidate (H, B) pairs (see the module docstring)."""
    heads = [h for h in range(1, model.heads_q + 1)
             if model.heads_q % h == 0 and (model.heads_q // h) % chunks == 0]
    top = max(MIN_BLOCK, min(MAX_BLOCK, shard_tokens))
    blocks = [b for b in (MIN_BLOCK << k for k in range(8)) if b <= top]
    return [(h, b) for h in heads for b in blocks]


def predicted_seconds(
    plan: AttentionPlan, cost: CostModel, model: ModelSpec, gpus_per_node: int
) -> tuple[float, float]:
    """(makespan, compute) of the slowest worker, forward + backward, for one layer.

    The plan's four all-to-alls are priced in one stacked call
    (``hardware/collectives/a2a_batch.py``:
    the same seconds as one :meth:`CostModel.all_to_allv` each, bit for bit)."""
    pairs = plan.worker_pairs / np.maximum(plan.worker_heads, 1)
    m = plan.chunks
    dispatch, ret = plan.dispatch_bytes, plan.return_bytes
    traffic = (dispatch, ret, ret.T, dispatch.T)  # forward out and back, then the backward's
    secs = all_to_allv_batch(cost, (mat / m for mat in traffic), gpus_per_node=gpus_per_node)
    total, compute = 0.0, 0.0
    for i, backward in enumerate((False, True)):
        c = np.asarray(cost.attention(pairs, plan.worker_doc_len, plan.worker_heads,
                                      model.heads_kv, model.head_dim, backward=backward))
        total += float(np.max(pipelined_time(c / m, secs[2 * i], secs[2 * i + 1], m)))
        compute += float(c.max())
    return total, compute


def representative_pools(loads: np.ndarray) -> list[int]:
    """Indices of the heaviest, median and lightest pool (deduplicated, in that order)."""
    order = np.argsort(-loads, kind="stable")
    picks = [int(order[0]), int(order[len(order) // 2]), int(order[-1])]
    return list(dict.fromkeys(picks))


@dataclass(frozen=True)
class PoolSetting:
    """Everything but (H, B) that TAP needs for a pool."""

    cp: int
    model: ModelSpec
    packed_length: int
    slack: float
    chunks: int
    policy: str


def rank(
    pools: Sequence[Sequence[np.ndarray]],
    setting: PoolSetting,
    cost: CostModel,
    candidates: Sequence[tuple[int, int]] | None = None,
    fits: Callable[[float], bool] = lambda _remote: True,
) -> Ranking:
    """Plan and cost every pool for every candidate; best (lowest predicted time) first.

    ``fits(remote_bytes)`` says whether the run's memory fits with a candidate's remote
    buffers; candidates that do not fit rank after every one that does.
    """
    s = setting
    gpn = int(cost.fabric.gpus_per_node)
    todo = candidates or grid(s.model, s.chunks, -(-s.packed_length // s.cp))
    out = []
    for h, b in todo:
        rows = []
        for pool in plan_pools(pools, cp=s.cp, model=s.model, heads_split=h, block_size=b,
                               packed_length=s.packed_length, slack=s.slack, chunks=s.chunks,
                               policy=s.policy):
            t, c = predicted_seconds(pool.attention, cost, s.model, gpn)
            rows.append((t, c, pool.attention.imbalance, pool.exchange_bytes,
                         pool.attention.held_remote_bytes))
        t, c, imb, nbytes, _ = (float(x) for x in np.mean(rows, axis=0))
        remote = max(r[-1] for r in rows)
        out.append(Candidate(h, b, t, c, t - c, imb, nbytes, remote, fits(remote)))
    # Candidates whose memory does not fit go last (the memory check then names the need).
    out.sort(key=lambda x: (not x.fits, x.predicted_s, x.heads_split, -x.block_size))
    return Ranking(tuple(out))


#: (H, B) for policies that run no TAP (Ulysses, WLB-LLM): recorded, never used.
UNUSED_KNOBS = (1, 16_384)


def pools_of_window(scenario: Scenario, window: PackedBatch) -> list[list[np.ndarray]]:
    """The representative pools of a window, grouped as the run groups it."""
    pool = pool_size_of(scenario)
    weights = window.sum_sq()
    order = pool_order(scenario, weights, pool).reshape(-1, pool)
    picks = representative_pools(weights[order].sum(axis=1))
    return [[window.seq(int(i)) for i in order[k]] for k in picks]


def resolve_knobs(
    scenario: Scenario,
    cost: CostModel,
    window: PackedBatch,
    fits: Callable[[float], bool] = lambda _remote: True,
) -> tuple[Scenario, Ranking | None]:
    """Replace ``auto`` H and B by the best candidate on ``window`` (the run's first)."""
    bal = scenario.balancer
    h, b = bal.heads_split, bal.block_size
    if isinstance(h, int) and isinstance(b, int):
        return scenario, None
    ranking = None
    if not balancer_of(scenario).runs_tap:
        h = UNUSED_KNOBS[0] if h == "auto" else h
        b = UNUSED_KNOBS[1] if b == "auto" else b
    else:
        par, model = scenario.parallelism, scenario.model
        shard = -(-scenario.workload.packed_length // par.cp)
        todo = [(ch, cb) for ch, cb in grid(model, bal.chunks, shard)
                if h in ("auto", ch) and b in ("auto", cb)]
        if not todo:  # a fixed B outside the grid: search H at that B
            todo = [(ch, int(b)) for ch in sorted({c[0] for c in grid(model, bal.chunks, shard)})]
        setting = PoolSetting(par.cp, model, scenario.workload.packed_length, bal.slack,
                              pipeliner_chunks(scenario), bal.policy)
        ranking = rank(pools_of_window(scenario, window), setting, cost, todo, fits)
        h, b = ranking.best.heads_split, ranking.best.block_size
    resolved = bal.model_copy(update={"heads_split": int(h), "block_size": int(b)})
    return scenario.model_copy(update={"balancer": resolved}), ranking
