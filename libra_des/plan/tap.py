"""TAP (Tiled Attention Pooling): balance core attention inside one sequence pool.

docs/model.md part A, implemented as written there: SH-tiles (block b, head shard h), KV groups
(sample j, head shard h), a communication-aware greedy placement with slack τ, an exchange plan
with KV de-duplication, and the Pipeliner's head-chunk schedule.

Layout assumptions of a pool (documented choices, not in the paper):

* Packed sequence ``p`` of the pool lives on DP replica ``p``; its CP workers are
  ``p*cp .. p*cp+cp-1`` and hold contiguous token shards ``[c*L//cp, (c+1)*L//cp)`` of the
  packed length ``L`` (trailing padding, if the samples sum to less than ``L``, is no work).
* Q-home of a tile = the worker holding the block's first token (a block straddling a shard
  boundary, when B does not divide L/cp, is charged as if all its queries lived there).
* A KV group's bytes are ``V_g = 2 * l_j * kv_heads_per_shard * head_dim * dtype_bytes`` with
  ``kv_heads_per_shard = max(heads_kv // H, 1)``: with GQA a shard of ``heads_q/H`` query heads
  needs ``heads_kv/H`` KV heads, and at least one when ``H > heads_kv`` (the KV head is then
  replicated across shards).
* Residency: before balancing, each worker holds the K/V of the tokens of its own CP shard for
  every head shard. A sample lying wholly inside one shard is therefore resident there and costs
  nothing to use; a sample crossing shard boundaries is held in pieces, and fetching its full
  group to worker ``r`` moves only the pieces ``r`` does not hold, each from the worker that
  holds it. (For wholly resident samples this is exactly "source = the group's home worker";
  for split samples it avoids charging a worker for bytes it already has.)
* Δcomm and the exchange plan use the same accounting, so the bytes the plan moves equal the
  sum of the Δcomm values chosen during placement.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict, Unpack

import numpy as np

from libra_des.config import ModelSpec
from libra_des.errors import InputError
from libra_des.plan import pipeline_kernel, tap_kernel
from libra_des.plan.attention import (
    Segments,
    as_lengths,
    block_doc_len,
    expand_runs,
    per_block,
    prefix_pairs,
)
from libra_des.plan.types import AttentionPlan, PairBytes

ArrayOrFloat = float | np.ndarray


@dataclass(frozen=True)
class Holdings:
    """Which worker holds how many tokens of which pool-global sample (one row per overlap)."""

    sample: np.ndarray
    worker: np.ndarray
    tokens: np.ndarray


@dataclass(frozen=True)
class TileSet:
    """SH-tiles of one pool, tile id ``t = global_block * H + h`` (sequence-major order).

    Per tile: ``seq`` (pool-local sequence), ``block`` (block index in its sequence), ``shard``
    (head shard h), ``flops`` (pair-heads: causal pairs x heads_q/H), ``doc_len`` (pair-weighted
    mean document length), ``q_home`` (worker), ``q_bytes``/``o_bytes`` (V_Q, V_O).
    KV groups ``K(t)`` in CSR form: ``group_ids[group_ptr[t]:group_ptr[t+1]]``; group
    ``g = sample * H + h`` has ``group_bytes[g]`` = V_g. ``sample_lengths`` are pool-global.
    """

    seq: np.ndarray
    block: np.ndarray
    shard: np.ndarray
    flops: np.ndarray
    doc_len: np.ndarray
    q_home: np.ndarray
    q_bytes: np.ndarray
    o_bytes: np.ndarray
    group_ptr: np.ndarray
    group_ids: np.ndarray
    group_bytes: np.ndarray
    sample_lengths: np.ndarray
    holdings: Holdings
    heads_split: int
    heads_per_shard: int
    kv_bytes_per_token: int
    workers: int

    def __len__(self) -> int:
        return int(self.flops.shape[0])

    def groups(self, t: int) -> np.ndarray:
        """K(t): the KV group ids tile ``t`` reads."""
        return self.group_ids[self.group_ptr[t] : self.group_ptr[t + 1]]

    @property
    def num_groups(self) -> int:
        return int(self.group_bytes.shape[0])


@dataclass(frozen=True)
class Placement:
    """Worker of every tile, per-worker loads (pair-heads) and the Δcomm chosen per tile."""

    worker: np.ndarray
    loads: np.ndarray
    delta: np.ndarray
    capacity: float
    order: np.ndarray

    @property
    def imbalance(self) -> float:
        mean = float(self.loads.mean())
        return float(self.loads.max()) / mean - 1.0 if mean > 0 else 0.0


@dataclass(frozen=True)
class ExchangePlan:
    """Forward traffic of one layer: de-duplicated KV fetches, Q dispatch and O return.

    ``kv_*`` rows are (group, source, destination, bytes); ``dispatch[s, d]`` holds KV and Q
    bytes sent before compute, ``ret[s, d]`` the O bytes sent back after it.
    """

    kv_group: np.ndarray
    kv_src: np.ndarray
    kv_dst: np.ndarray
    kv_bytes: np.ndarray
    dispatch: np.ndarray
    ret: np.ndarray

    @property
    def total_bytes(self) -> float:
        return float(self.dispatch.sum() + self.ret.sum())


@dataclass(frozen=True)
class ChunkPlan:
    """The Pipeliner's view of a worker's work: M equal head chunks (docs/model.md A)."""

    chunks: int
    heads_per_chunk: int
    chunk_pairs: np.ndarray
    chunk_dispatch: np.ndarray
    chunk_return: np.ndarray


@dataclass(frozen=True)
class PoolPlan:
    """Everything TAP decided for one pool; ``tiles`` is the tile count."""

    tile_set: TileSet
    placement: Placement
    exchange: ExchangePlan
    attention: AttentionPlan
    exchange_bytes: float
    tiles: int
    plan_seconds: float


# ----------------------------------------------------------------------------- tiles


def shard_model(model: ModelSpec, heads_split: int) -> tuple[int, int]:
    """(query heads per shard, KV heads per shard) for H = ``heads_split``."""
    if heads_split <= 0 or model.heads_q % heads_split:
        raise InputError("heads_split", heads_split, f"a divisor of heads_q={model.heads_q}")
    return model.heads_q // heads_split, max(model.heads_kv // heads_split, 1)


def pool_lengths(seqs: Sequence[np.ndarray], packed_length: int) -> list[np.ndarray]:
    """Validate every packed sequence of the pool (positive lengths summing to <= L)."""
    out = [as_lengths(s, "seqs") for s in seqs]
    if not out:
        raise InputError("seqs", 0, "at least one packed sequence per pool")
    for p, lens in enumerate(out):
        if int(lens.sum()) > packed_length:
            raise InputError(f"seqs[{p}]", int(lens.sum()), f"<= packed_length={packed_length}")
    return out


def flat_lengths(seqs: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(every sample length, samples per sequence) as int64, for the kernels."""
    seqs = [int64s(s) for s in seqs]
    sizes = np.array([s.size for s in seqs], dtype=np.int64)
    lens = np.concatenate(seqs) if seqs else np.zeros(0, dtype=np.int64)
    return lens, sizes


def holdings(seqs: Sequence[np.ndarray], cp: int, packed_length: int) -> Holdings:
    """Token overlap of every sample with every CP shard of its replica (``tap_kernel``)."""
    lens, sizes = flat_lengths(seqs)
    return Holdings(*tap_kernel.holdings(lens, sizes, int(cp), int(packed_length)))


@dataclass(frozen=True)
class Blocks:
    """Block-level table of a pool (all sequences' blocks, sequence-major).

    ``seq``/``local``: owning sequence and block index in it; ``start``/``tokens``: global
    token range inside the sequence; ``pairs``: exact causal pairs; ``doc_len``: pair-weighted
    mean document length; ``seg_sample``/``seg_count``: the pool-global samples of each block.
    """

    seq: np.ndarray
    local: np.ndarray
    start: np.ndarray
    tokens: np.ndarray
    pairs: np.ndarray
    doc_len: np.ndarray
    seg_sample: np.ndarray
    seg_count: np.ndarray


def pool_blocks(lens_list: Sequence[np.ndarray], block_size: int) -> Blocks:
    """Cut every packed sequence into blocks of ``block_size`` tokens, all sequences at once.

    The same table as :func:`~libra_des.plan.attention.segments` per sequence, concatenated:
    block ids run on across sequences, so per-block sums see the same segments in the same
    order (tests/test_tap_kernel.py compares the two).
    """
    if block_size <= 0:
        raise InputError("block_size", block_size, "a positive number of tokens")
    lens = np.concatenate(lens_list).astype(np.int64)
    ptr = csr_ptr(np.array([x.size for x in lens_list], dtype=np.int64))
    owner = np.repeat(np.arange(len(lens_list), dtype=np.int64), np.diff(ptr))
    cum = np.concatenate([[0], np.cumsum(lens)])
    totals = cum[ptr[1:]] - cum[ptr[:-1]]
    starts = cum[:-1] - cum[ptr[:-1]][owner]  # sample start inside its sequence
    nblocks = -(-totals // block_size)
    seq, local = expand_runs(nblocks)
    block_starts = local * block_size
    block_ends = np.minimum(block_starts + block_size, totals[seq])
    first = starts // block_size
    sample, pos = expand_runs((starts + lens - 1) // block_size - first + 1)
    block = csr_ptr(nblocks)[owner[sample]] + first[sample] + pos
    begin = starts[sample]
    a = np.maximum(block_starts[block], begin) - begin
    e = np.minimum(block_ends[block], begin + lens[sample]) - begin
    seg = Segments(block, sample, a, e, prefix_pairs(e, None) - prefix_pairs(a, None),
                   block_starts, block_ends)
    return Blocks(
        seq=seq,
        local=local,
        start=block_starts,
        tokens=block_ends - block_starts,
        pairs=per_block(seg, seg.pairs),
        doc_len=block_doc_len(seg, lens),
        seg_sample=sample,
        seg_count=np.bincount(block, minlength=seq.size),
    )


def build_tiles(
    seqs: Sequence[np.ndarray],
    *,
    cp: int,
    model: ModelSpec,
    heads_split: int,
    block_size: int,
    packed_length: int,
) -> TileSet:
    """Cut every packed sequence of the pool into SH-tiles and attach their KV groups."""
    if cp <= 0:
        raise InputError("cp", cp, "a positive CP degree")
    if packed_length < cp:
        raise InputError("packed_length", packed_length, f">= cp={cp}")
    hps, kvh = shard_model(model, heads_split)
    lens_list = pool_lengths(seqs, packed_length)
    blocks = pool_blocks(lens_list, block_size)
    h = heads_split
    bounds = np.arange(cp + 1, dtype=np.int64) * packed_length // cp
    q_home = blocks.seq * cp + np.searchsorted(bounds, blocks.start, side="right") - 1
    qo_bytes = blocks.tokens * hps * model.head_dim * model.dtype_bytes
    lens, sizes = flat_lengths(lens_list)
    group_ptr, group_ids, *held = tap_kernel.tile_tables(
        int64s(blocks.seg_sample), int64s(blocks.seg_count), int(h), lens, sizes, int(cp),
        int(packed_length))  # tile_groups() and holdings() in one kernel call
    lengths = np.concatenate(lens_list)
    kv_bpt = 2 * kvh * model.head_dim * model.dtype_bytes
    return TileSet(
        seq=np.repeat(blocks.seq, h),
        block=np.repeat(blocks.local, h),
        shard=np.tile(np.arange(h, dtype=np.int64), blocks.seq.size),
        flops=np.repeat(blocks.pairs * hps, h),
        doc_len=np.repeat(blocks.doc_len, h),
        q_home=np.repeat(q_home, h),
        q_bytes=np.repeat(qo_bytes, h),
        o_bytes=np.repeat(qo_bytes, h),
        group_ptr=group_ptr,
        group_ids=group_ids,
        group_bytes=np.repeat(lengths, h) * kv_bpt,
        sample_lengths=lengths,
        holdings=Holdings(*held),
        heads_split=h,
        heads_per_shard=hps,
        kv_bytes_per_token=kv_bpt,
        workers=len(lens_list) * cp,
    )


def tile_groups(
    seg_sample: np.ndarray, seg_count: np.ndarray, h_count: int
) -> tuple[np.ndarray, np.ndarray]:
    """CSR of K(t): tile ``b*H + h`` reads group ``j*H + h`` for every sample j in block b
    (``tap_kernel.tile_groups``)."""
    ptr, ids = tap_kernel.tile_groups(int64s(seg_sample), int64s(seg_count), int(h_count))
    return ptr, ids


# ----------------------------------------------------------------------------- placement


def place(tiles: TileSet, workers: int, slack: float = 0.03) -> Placement:
    """docs/model.md's greedy: target C=(1+τ)Σf/W, tiles by decreasing f then id, pick the
    candidate (load+f<=C) with least (Δcomm, load, id), else the worker with least
    (load, Δcomm, id); then add f to its load and K(t) to its fetched set
    (``tap_kernel.greedy``; tests/reference/tap.py holds a plain numpy copy to compare).
    """
    if workers < tiles.workers:
        raise InputError("workers", workers, f">= the pool's {tiles.workers} workers")
    if slack < 0:
        raise InputError("slack", slack, ">= 0")
    flops = tiles.flops.astype(np.int64)
    total = int(flops.sum())
    capacity = (1.0 + slack) * float(total) / workers
    order = np.argsort(-flops, kind="stable")  # decreasing f, ties by id (lexsort's order)
    hold = tiles.holdings  # rows are in sample order (see holdings())
    hold_ptr = csr_ptr(np.bincount(hold.sample, minlength=tiles.sample_lengths.size))
    chosen, load, delta = tap_kernel.greedy(
        order,
        flops,
        int64s(tiles.q_home),
        (tiles.q_bytes + tiles.o_bytes).astype(np.int64),
        int64s(tiles.group_ptr),
        int64s(tiles.group_ids),
        np.repeat(tiles.sample_lengths, tiles.heads_split).astype(np.int64),
        int(tiles.heads_split),
        hold_ptr,
        int64s(hold.worker),
        int64s(hold.tokens),
        int(workers),
        int(tiles.kv_bytes_per_token),
        capacity,
    )
    return Placement(chosen, load, delta, capacity, order)


# ----------------------------------------------------------------------------- exchange


def int64s(values: np.ndarray) -> np.ndarray:
    """``values`` as int64 for the kernels, copied only when they are of another type (the
    kernels only read them)."""
    return np.asarray(values, dtype=np.int64)


def csr_ptr(count: np.ndarray) -> np.ndarray:
    """Offsets (length n+1) of consecutive runs of ``count`` items."""
    return np.concatenate([[0], np.cumsum(count, dtype=np.int64)])


def exchange_plan(tiles: TileSet, placement: Placement) -> ExchangePlan:
    """De-duplicated KV fetches per (sample, head shard, destination), plus remote Q and O.

    Recomputed from the final placement rather than from the Δcomm trace, so the property
    "bytes moved == Σ chosen Δcomm" checks the two accountings against each other. Every
    piece of a needed group comes from the worker holding it; pieces the destination already
    holds move nothing (``tap_kernel.kv_fetches``).
    """
    workers = int(placement.loads.shape[0])
    hold = tiles.holdings  # rows are in sample order (see holdings())
    hold_ptr = csr_ptr(np.bincount(hold.sample, minlength=tiles.sample_lengths.size))
    return ExchangePlan(*tap_kernel.exchange(
        int64s(tiles.group_ptr), int64s(tiles.group_ids), int64s(placement.worker),
        tiles.num_groups, int(tiles.heads_split), hold_ptr, int64s(hold.worker),
        int64s(hold.tokens), int(tiles.kv_bytes_per_token), int64s(tiles.q_home),
        int64s(tiles.q_bytes), int64s(tiles.o_bytes), workers))


# ----------------------------------------------------------------------------- pipeliner


def check_chunks(chunks: int, heads_per_shard: int) -> None:
    """M must divide heads_q/H so that every chunk has the same heads (docs/model.md A)."""
    if chunks <= 0 or heads_per_shard % chunks:
        raise InputError("chunks", chunks, f"a divisor of heads_q/H={heads_per_shard}")


def pipeline_chunks(plan: AttentionPlan, *, heads_per_shard: int, chunks: int) -> ChunkPlan:
    """Split every worker's concatenated tiles into M head chunks of equal FLOPs and bytes."""
    check_chunks(chunks, heads_per_shard)
    return ChunkPlan(
        chunks=chunks,
        heads_per_chunk=heads_per_shard // chunks,
        chunk_pairs=plan.worker_pairs / chunks,
        chunk_dispatch=plan.dispatch_bytes / chunks,
        chunk_return=plan.return_bytes / chunks,
    )


def pipelined_time(
    compute_chunk: ArrayOrFloat, dispatch_chunk: ArrayOrFloat, return_chunk: ArrayOrFloat, m: int
) -> ArrayOrFloat:
    """Makespan of the Pipeliner schedule for M equal chunks on one worker.

    Schedule (docs/model.md A): dispatch chunk 0; for each chunk k, wait for its input, then
    compute it while dispatching chunk k+1 and returning chunk k-1; finally wait for the last
    return. Assumption: transfers share one communication channel and run one at a time in
    issue order (dispatch k+1 before return k-1), because both use the same links; compute
    runs beside them. Closed forms: compute-bound (c >= d + r) gives d + M*c + r; with free
    compute it is M*(d + r); so at most (M-1)/M of the traffic hides. Works elementwise on
    numpy arrays (the simulator evaluates every worker and layer at once).
    """
    if m <= 0:
        raise InputError("chunks", m, "a positive chunk count")
    c, d, r = compute_chunk, dispatch_chunk, return_chunk
    if min(np.min(c), np.min(d), np.min(r)) < 0:
        raise InputError("pipelined_time", "negative", "non-negative durations")
    out = pipelined_array(np.asarray(c), np.asarray(d), np.asarray(r), m)
    return float(out) if out.ndim == 0 else out


def pipelined_array(c: np.ndarray, d: np.ndarray, r: np.ndarray, m: int) -> np.ndarray:
    """:func:`pipelined_time` on arrays (or 0-d ones), in ``pipeline_kernel``'s one pass.

    The simulator calls it on every worker, layer and slot of a step at once (millions of
    elements at 131k GPUs) with one dispatch and return per row of compute
    (:func:`per_row_layout`); any other broadcast is flattened to one element a row.
    """
    shape = np.broadcast_shapes(c.shape, d.shape, r.shape)
    rows = per_row_layout(c, d, r)
    if rows:
        flat = np.ascontiguousarray(c, dtype=np.float64).reshape(rows, -1)
        dk, rk = d.astype(np.float64).ravel(), r.astype(np.float64).ravel()
    else:
        flat = np.broadcast_to(c, shape).astype(np.float64).reshape(-1, 1)
        dk = np.broadcast_to(d, shape).astype(np.float64).ravel()
        rk = np.broadcast_to(r, shape).astype(np.float64).ravel()
    return pipeline_kernel.pipelined_rows(flat, dk, rk, m).reshape(shape)


def per_row_layout(c: np.ndarray, d: np.ndarray, r: np.ndarray) -> int:
    """Rows K when ``c`` is float64 ``[*lead, *rest]`` and ``d``, ``r`` are ``[*lead, 1, ...]``
    (one dispatch and return per row of compute, as the simulator calls it); else 0."""
    if c.dtype != np.float64 or c.ndim < 2 or d.shape != r.shape or d.ndim != c.ndim:
        return 0
    lead = next((i for i in range(d.ndim) if d.shape[i] == 1), d.ndim)
    if lead == 0 or d.shape[:lead] != c.shape[:lead] or any(x != 1 for x in d.shape[lead:]):
        return 0
    return int(np.prod(c.shape[:lead]))


# ----------------------------------------------------------------------------- pool plan


def fold_attention_plan(
    tiles: TileSet, placement: Placement, exchange: ExchangePlan, policy: str, chunks: int
) -> AttentionPlan:
    """Fold the placement and exchange into the simulator's per-worker record."""
    workers = int(placement.loads.shape[0])
    weight, pairs = tap_kernel.worker_work(int64s(placement.worker), int64s(tiles.flops),
                                           tiles.doc_len.astype(np.float64), workers)
    doc = np.divide(weight, pairs, out=np.zeros(workers), where=pairs > 0)
    return AttentionPlan(
        policy=policy,
        worker_pairs=placement.loads.astype(np.float64),
        worker_doc_len=doc,
        worker_heads=np.full(workers, tiles.heads_per_shard, dtype=np.int64),
        dispatch=PairBytes.of(exchange.dispatch),
        returns=PairBytes.of(exchange.ret),
        chunks=chunks,
        tiles=len(tiles),
    )


class TileLayout(TypedDict):
    """The keyword arguments of :func:`build_tiles`, forwarded by the pool planners."""

    cp: int
    model: ModelSpec
    heads_split: int
    block_size: int
    packed_length: int


def plan_pool(
    seqs: Sequence[np.ndarray],
    *,
    slack: float = 0.03,
    chunks: int = 1,
    policy: str = "libra",
    **layout: Unpack[TileLayout],
) -> PoolPlan:
    """TAP for one pool: tiles -> placement -> exchange plan -> AttentionPlan (timed).

    ``layout`` is ``cp, model, heads_split, block_size, packed_length`` (see build_tiles).
    ``policy`` is the plan's label: the caller's balancer (one that runs TAP, checked where
    the name comes in: a scenario's ``balancer.policy`` when it is elaborated), not looked up
    here, so the planners below the balancer registry never import it.
    """
    check_chunks(chunks, shard_model(layout["model"], layout["heads_split"])[0])
    began = time.perf_counter()
    return plan_tiles(build_tiles(seqs, **layout), slack=slack, chunks=chunks, policy=policy,
                      began=began)


def plan_tiles(
    tiles: TileSet, *, slack: float, chunks: int, policy: str, began: float
) -> PoolPlan:
    """:func:`plan_pool` from the pool's tiles on (``began``: when its planning started)."""
    placement = place(tiles, tiles.workers, slack)
    exchange = exchange_plan(tiles, placement)
    attention = fold_attention_plan(tiles, placement, exchange, policy, chunks)
    return PoolPlan(
        tile_set=tiles,
        placement=placement,
        exchange=exchange,
        attention=attention,
        exchange_bytes=exchange.total_bytes,
        tiles=len(tiles),
        plan_seconds=time.perf_counter() - began,
    )
