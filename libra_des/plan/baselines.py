"""Baseline plans the Libra training paper compares against (docs/model.md part A).

* Ulysses: one CP group splits the query heads; each of the ``cp`` workers computes
  ``heads_q/cp`` heads of the whole packed sequence, so the group is perfectly balanced but
  nothing is balanced across DP replicas.
* DistCA: TAP over one pool spanning every DP replica (P = DP).
* WLB-LLM, idealised (``wlb_llm_ideal``): variable-length packing of a step's samples into
  its ``d`` microbatches with a quadratic + linear FLOP cost model, optionally deferring
  outlier documents to later steps; its microbatches then run Ulysses (an upper bound:
  WLB-LLM as its code runs is ``libra_des.plan.wlb_llm``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Unpack

import numpy as np

from libra_des.config import ModelSpec
from libra_des.errors import InputError
from libra_des.plan.attention import as_lengths, causal_pairs, doc_len
from libra_des.plan.tap import PoolPlan, TileLayout, plan_pool
from libra_des.plan.types import AttentionPlan, PairBytes
from libra_des.workload.packing import PackedBatch, cut_pieces

# ----------------------------------------------------------------------------- Ulysses


def ulysses_plan(
    seq: np.ndarray, *, cp: int, model: ModelSpec, packed_length: int | None = None
) -> AttentionPlan:
    """Head-split attention of one packed sequence over its CP group (DeepSpeed-Ulysses).

    Before attention every rank holds ``T/cp`` tokens of Q (all ``heads_q`` heads) and of K, V
    (all ``heads_kv`` heads); an all-to-all gives each rank all ``T`` tokens of its
    ``heads_q/cp`` query heads, so each rank sends ``(cp-1)/cp`` of its local Q, K, V. Each
    rank needs ``ceil(heads_kv/cp)`` KV heads: when ``heads_kv < cp`` a KV head is replicated
    to every rank whose query heads use it. After attention O travels back the same way.
    ``T`` is ``packed_length`` when given (padded tensors move), else the sequence's tokens.
    """
    if cp <= 0 or model.heads_q % cp:
        raise InputError("cp", cp, f"a divisor of heads_q={model.heads_q} for Ulysses")
    lens = as_lengths(seq, "seq")
    tokens = float(packed_length if packed_length is not None else lens.sum())
    heads = model.heads_q // cp
    kv_heads = -(-model.heads_kv // cp)
    width = model.head_dim * model.dtype_bytes
    per_rank = tokens / cp / cp  # tokens one rank sends to one peer
    off_diag = 1.0 - np.eye(cp)
    return AttentionPlan(
        policy="ulysses",
        worker_pairs=np.full(cp, float(causal_pairs(lens) * heads)),
        worker_doc_len=np.full(cp, doc_len(lens)),
        worker_heads=np.full(cp, heads, dtype=np.int64),
        dispatch=PairBytes.of(off_diag * per_rank * width * (model.heads_q + 2 * kv_heads * cp)),
        returns=PairBytes.of(off_diag * per_rank * width * model.heads_q),
        chunks=1,
        tiles=0,
        swaps_qkv=True,
    )


# ----------------------------------------------------------------------------- DistCA


def distca_plan(
    seqs: Sequence[np.ndarray],
    *,
    slack: float = 0.03,
    chunks: int = 1,
    **layout: Unpack[TileLayout],
) -> PoolPlan:
    """distca_tiles: the same tiles, placement and Pipeliner over one pool of all DP replicas.

    ``layout`` is ``cp, model, heads_split, block_size, packed_length`` as for plan_pool.
    """
    return plan_pool(seqs, slack=slack, chunks=chunks, policy="distca_tiles", **layout)


# ----------------------------------------------------------------------------- WLB-LLM


@dataclass(frozen=True)
class WlbResult:
    """WLB-LLM's packing of one step.

    ``batch``: the ``d`` microbatches (CSR; ``sample_ids`` index the step's candidate list,
    queued samples first). ``deferred``: lengths moved to a later step (the queue to pass to
    the next call). ``cost[i]``: a*Σl² + b*Σl of microbatch i. ``overflow_tokens``: tokens
    above ``packed_length`` in microbatches that had to be over-filled (deferral off only).
    """

    batch: PackedBatch
    changes_step_samples: bool
    deferred: np.ndarray
    deferred_ids: np.ndarray
    cost: np.ndarray
    overflow_tokens: int


def wlb_cost_coefficients(model: ModelSpec, attention_only: bool = False) -> tuple[float, float]:
    """Forward FLOPs per layer as (a per l², b per token) for the cost a*Σl² + b*Σl.

    Core attention: l(l+1)/2 causal pairs x 4*head_dim FLOPs x heads_q ≈ 2*head_dim*heads_q*l².
    Linear: 2 FLOPs per weight a token touches (QKV/O projections, and the dense FFN or the
    top-k routed plus shared experts with three matrices each). A core-attention-only run
    has no linear layers, so WLB-LLM balances its quadratic term alone (b = 0): it packs by
    the work that run actually has.
    """
    proj = model.hidden * model.head_dim * (2 * model.heads_q + 2 * model.heads_kv)
    if model.is_moe:
        expert = 3 * model.hidden * (model.expert_ffn or 0)
        ffn = expert * (model.top_k + model.shared_experts)
    else:
        ffn = 3 * model.hidden * (model.ffn or 0)
    quadratic = 2.0 * model.head_dim * model.heads_q
    return (quadratic, 0.0) if attention_only else (quadratic, 2.0 * (proj + ffn))


def wlb_llm_pack(
    lengths: np.ndarray,
    packed_length: int,
    d: int,
    *,
    defer_outliers: bool = False,
    outlier_threshold: int | None = None,
    queue: np.ndarray | None = None,
    coefficients: tuple[float, float] = (1.0, 0.0),
) -> WlbResult:
    """Variable-length packing of one step's samples into ``d`` microbatches of <= L tokens.

    Greedy fill: samples (cut to <= L pieces) by decreasing length, ties by id, each into the
    currently cheapest microbatch (cost a*Σl² + b*Σl, ties by index) that still has room.
    Outlier deferral (optional; WLB-LLM's outlier delay): pieces longer than
    ``outlier_threshold`` (default L/2) wait in a first-in first-out queue; once ``d`` of
    them are waiting, the ``d`` oldest are released into the step, one per microbatch (two
    pieces over L/2 never share one), and the rest keep waiting; anything that fits nowhere
    is deferred too. Without deferral
    a piece that fits nowhere over-fills the microbatch with the most room, so the step keeps
    exactly its samples. Deferral changes the samples of a step: ``changes_step_samples``.
    """
    if packed_length <= 0:
        raise InputError("packed_length", packed_length, "> 0")
    if d <= 0:
        raise InputError("d", d, "a positive number of microbatches")
    queued = as_lengths(queue if queue is not None else np.zeros(0, np.int64), "queue")
    pieces, ids = cut_pieces(np.concatenate([queued, as_lengths(lengths)]), packed_length)
    threshold = packed_length // 2 if outlier_threshold is None else outlier_threshold
    if threshold <= 0:
        raise InputError("outlier_threshold", threshold, "> 0")
    held = held_outliers(pieces, d, threshold) if defer_outliers else np.zeros(pieces.size, bool)
    slot, overflow = greedy_fill(pieces, ~held, packed_length, d, coefficients, defer_outliers)
    held |= slot < 0
    batch, order = slotted_batch(pieces, ids, slot, d, packed_length)
    a, b = coefficients
    per_sq = np.bincount(slot[order], weights=pieces[order].astype(float) ** 2, minlength=d)
    per_tok = np.bincount(slot[order], weights=pieces[order].astype(float), minlength=d)
    return WlbResult(
        batch=batch,
        changes_step_samples=bool(held.any() or queued.size),
        deferred=pieces[held],
        deferred_ids=ids[held],
        cost=a * per_sq + b * per_tok,
        overflow_tokens=overflow,
    )


def held_outliers(pieces: np.ndarray, d: int, threshold: int) -> np.ndarray:
    """Pieces the outlier queue holds back: those over ``threshold`` past the ``d`` oldest.

    The queue comes first in ``pieces``, then the step's samples in arrival order, so
    outliers past the first d are the youngest: they wait (all wait when fewer than d).
    """
    outlier = pieces > threshold
    return outlier & (np.cumsum(outlier) > (d if np.count_nonzero(outlier) >= d else 0))


def slotted_batch(pieces: np.ndarray, ids: np.ndarray, slot: np.ndarray, d: int,
                  packed_length: int) -> tuple[PackedBatch, np.ndarray]:
    """The ``d`` microbatches of the pieces with a slot (>= 0), each in piece order, and
    the order that lists them."""
    order = np.lexsort((np.arange(pieces.size), slot))[np.count_nonzero(slot < 0) :]
    offsets = np.searchsorted(slot[order], np.arange(d + 1), side="left").astype(np.int64)
    return PackedBatch(pieces[order], offsets, ids[order], packed_length), order


def greedy_fill(
    pieces: np.ndarray,
    active: np.ndarray,
    capacity: int,
    d: int,
    coefficients: tuple[float, float],
    defer_misses: bool,
) -> tuple[np.ndarray, int]:
    """Microbatch of every active piece (-1: inactive, or deferred for lack of room).

    A piece that fits nowhere is deferred when ``defer_misses``, else it over-fills the
    microbatch with the most room left (the returned overflow counts the excess tokens).
    """
    a, b = coefficients
    slot = np.full(pieces.size, -1, dtype=np.int64)
    free = np.full(d, capacity, dtype=np.int64)
    cost = np.zeros(d)
    overflow = 0
    idx = np.flatnonzero(active)
    for i in idx[np.lexsort((idx, -pieces[idx]))].tolist():
        length = int(pieces[i])
        fits = free >= length
        if fits.any():
            k = int(np.argmin(np.where(fits, cost, np.inf)))
        elif defer_misses:
            continue
        else:
            k = int(np.argmax(free))
            overflow += length - max(int(free[k]), 0)
        slot[i] = k
        free[k] -= length
        cost[k] += a * length * length + b * length
    return slot, overflow
