"""TAP's tiles for many pools at once: one pass of numpy over every pool's sequences.

A step at scale plans hundreds of pools (512 at 16,384 GPUs), each a few hundred blocks:
:func:`~libra_des.plan.tap.build_tiles` per pool spends most of its time in the fixed cost
of some 80 small numpy calls (measured on scale-16384; figures in benchmarks/README.md).
:func:`build_tiles_many` cuts every sequence of every pool into blocks in one call
(:func:`~libra_des.plan.tap.pool_blocks` and :func:`~libra_des.plan.tap.holdings` already
work sequence by sequence, their ids running on across sequences), then gives each pool its
slice with its ids made pool-local again. Every per-block value is computed from the same
elements in the same order as the per-pool call (elementwise operations, and per-block sums
over the block's own segments), so each pool's :class:`~libra_des.plan.tap.TileSet` equals
``build_tiles``'s bit for bit (``tests/test_tile_batch.py`` compares every field).

For the step's planner (the balancers' ``attention_many``), :func:`attention_plans` goes on
from the batch's tiles to its attention plans without a per-pool tile set: every pool is
placed, exchanged and folded in one compiled call (``tap_batch_kernel``), which gives the
plans :func:`plan_pools` gives, bit for bit (the test compares every field).

Input checks are those of ``build_tiles``: a batch that fails the fast check (all one-
dimensional int64 arrays, positive lengths, every sequence within the packed length) is
checked pool by pool, which raises the per-pool error.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar, Unpack

import numpy as np

from libra_des.plan import tap_batch_kernel
from libra_des.plan.tap import (
    Holdings,
    PoolPlan,
    TileLayout,
    TileSet,
    build_tiles,
    check_chunks,
    csr_ptr,
    holdings,
    plan_tiles,
    pool_blocks,
    shard_model,
    tile_groups,
)
from libra_des.plan.types import AttentionPlan, PairBytes

T = TypeVar("T")


#: Packed sequences whose tiles one numpy pass builds. Measured on scale-16384's 512 pools of
#: 8 sequences (976 tiles, 13.7k group references each; figures in benchmarks/README.md):
#: batches of 2 to 32 pools beat one pool at a time, and all 512 at once is slower again
#: (arrays of tens of MB, out of cache and faulted in afresh). 16 pools of 8 is
#: our choice; a pool wider than this (DistCA's, all DP replicas) is built on its own, so
#: no batch holds more tiles than the per-pool planner did or than this bound.
BATCH_SEQUENCES = 128


def batches(pools: Sequence[Sequence[T]]) -> Iterator[Sequence[Sequence[T]]]:
    """``pools`` in consecutive batches of at most :data:`BATCH_SEQUENCES` sequences (a wider
    pool alone)."""
    start, size = 0, 0
    for end, pool in enumerate(pools):
        if end > start and size + len(pool) > BATCH_SEQUENCES:
            yield pools[start:end]
            start, size = end, 0
        size += len(pool)
    if start < len(pools):
        yield pools[start:]


def plan_pools(
    pools: Sequence[Sequence[np.ndarray]],
    *,
    slack: float = 0.03,
    chunks: int = 1,
    policy: str = "libra",
    **layout: Unpack[TileLayout],
) -> Iterator[PoolPlan]:
    """:func:`~libra_des.plan.tap.plan_pool` for every pool, the tiles built in one pass.

    The plans come one at a time (a wide pool's plan holds dense [W, W] byte matrices: the
    caller keeps what it needs of each before the next is made). ``plan_seconds`` of each
    pool is its own placement and exchange time plus an equal share of the tile building.
    """
    check_settings(chunks, layout)
    began = time.perf_counter()
    tile_sets = build_tiles_many(pools, **layout)
    share = (time.perf_counter() - began) / max(len(tile_sets), 1)
    return (plan_tiles(tiles, slack=slack, chunks=chunks, policy=policy,
                       began=time.perf_counter() - share)
            for tiles in tile_sets)


def attention_plans(
    pools: Sequence[Sequence[np.ndarray]],
    *,
    slack: float = 0.03,
    chunks: int = 1,
    policy: str = "libra",
    **layout: Unpack[TileLayout],
) -> list[AttentionPlan]:
    """``[p.attention for p in plan_pools(...)]``, the same plans, every pool of the batch
    placed and folded in one compiled call (``tap_batch_kernel.attention_rows``)."""
    check_settings(chunks, layout)
    batch = tile_batch(pools, **layout)
    if batch is None:
        return [p.attention for p in plan_pools(pools, slack=slack, chunks=chunks,
                                                policy=policy, **layout)]
    t = batch.tiles
    pairs, doc, d_ptr, d_flat, d_val, r_ptr, r_flat, r_val = tap_batch_kernel.attention_rows(
        t.flops.astype(np.int64), t.q_home, t.q_bytes, t.o_bytes, t.doc_len.astype(np.float64),
        t.group_ptr, t.group_ids, t.sample_lengths, t.holdings.sample, t.holdings.worker,
        t.holdings.tokens, batch.pools, int(t.heads_split), int(batch.cp),
        int(t.kv_bytes_per_token), float(slack))
    sizes = np.diff(batch.pools[:, 0]) * batch.cp
    # PairBytes.of's index type: int32 while a matrix has fewer than 2**31 entries.
    index = {True: (d_flat.astype(np.int32), r_flat.astype(np.int32)), False: (d_flat, r_flat)}
    w_ptr = csr_ptr(sizes)
    out = []
    for p in range(len(batch)):
        w, w0, w1 = int(sizes[p]), int(w_ptr[p]), int(w_ptr[p + 1])
        d0, d1, r0, r1 = int(d_ptr[p]), int(d_ptr[p + 1]), int(r_ptr[p]), int(r_ptr[p + 1])
        d_flat, r_flat = index[w * w < 2**31]
        out.append(AttentionPlan(
            policy=policy,
            worker_pairs=pairs[w0:w1],
            worker_doc_len=doc[w0:w1],
            worker_heads=np.full(w, t.heads_per_shard, dtype=np.int64),
            dispatch=PairBytes(w, d_flat[d0:d1], d_val[d0:d1]),
            returns=PairBytes(w, r_flat[r0:r1], r_val[r0:r1]),
            chunks=chunks,
            tiles=int(batch.pools[p + 1, 2] - batch.pools[p, 2]),
        ))
    return out


def check_settings(chunks: int, layout: TileLayout) -> None:
    """The pool planners' own check: M dividing the shard's heads (``policy`` is the plans'
    label, checked where the name comes in, as :func:`~libra_des.plan.tap.plan_pool` says)."""
    check_chunks(chunks, shard_model(layout["model"], layout["heads_split"])[0])


def fast_lengths(pools: Sequence[Sequence[np.ndarray]], packed_length: int
                 ) -> list[np.ndarray] | None:
    """Every sequence of every pool, in order, when all pass ``pool_lengths``' checks in the
    form the planner hands them (1-D int64 arrays); None to check pool by pool instead."""
    seqs = [s for pool in pools for s in pool]
    if not seqs or not all(len(pool) for pool in pools):
        return None
    if not all(isinstance(s, np.ndarray) and s.ndim == 1 and s.dtype == np.int64 for s in seqs):
        return None
    flat = np.concatenate(seqs)
    if flat.size and flat.min() <= 0:
        return None
    cum = np.concatenate([[0], np.cumsum(flat)])
    ends = csr_ptr(np.array([s.size for s in seqs], dtype=np.int64))
    if (cum[ends[1:]] - cum[ends[:-1]]).max() > packed_length:
        return None
    return seqs


@dataclass(frozen=True)
class TileBatch:
    """The tiles of consecutive pools in one :class:`TileSet` whose ids run on across pools
    (sequences, workers, samples, groups), and each pool's first sequence, sample, tile and
    holdings row (``pools``, one more row closing the batch)."""

    tiles: TileSet
    pools: np.ndarray
    cp: int

    def __len__(self) -> int:
        return int(self.pools.shape[0]) - 1

    def pool(self, p: int) -> TileSet:
        """Pool ``p``'s tile set, its ids pool-local: ``build_tiles`` of its sequences."""
        t, (s0, j0, t0, r0), (s1, j1, t1, r1) = self.tiles, self.pools[p], self.pools[p + 1]
        s0, j0, t0, r0, s1, j1, t1, r1 = (int(x) for x in (s0, j0, t0, r0, s1, j1, t1, r1))
        cp, h = self.cp, t.heads_split
        g0, g1 = int(t.group_ptr[t0]), int(t.group_ptr[t1])
        hold = t.holdings
        return TileSet(
            seq=t.seq[t0:t1] - s0,
            block=t.block[t0:t1],
            shard=t.shard[t0:t1],
            flops=t.flops[t0:t1],
            doc_len=t.doc_len[t0:t1],
            q_home=t.q_home[t0:t1] - s0 * cp,
            q_bytes=t.q_bytes[t0:t1].copy(),
            o_bytes=t.o_bytes[t0:t1].copy(),
            group_ptr=t.group_ptr[t0:t1 + 1] - g0,
            group_ids=t.group_ids[g0:g1] - j0 * h,
            group_bytes=t.group_bytes[j0 * h:j1 * h],
            sample_lengths=t.sample_lengths[j0:j1],
            holdings=Holdings(hold.sample[r0:r1] - j0, hold.worker[r0:r1] - s0 * cp,
                              hold.tokens[r0:r1]),
            heads_split=h,
            heads_per_shard=t.heads_per_shard,
            kv_bytes_per_token=t.kv_bytes_per_token,
            workers=(s1 - s0) * cp,
        )


def build_tiles_many(
    pools: Sequence[Sequence[np.ndarray]], **layout: Unpack[TileLayout]
) -> list[TileSet]:
    """``[build_tiles(seqs, **layout) for seqs in pools]``, the same tile sets, in one pass."""
    batch = tile_batch(pools, **layout)
    if batch is None:  # build_tiles names the error (or takes the unusual input)
        return [build_tiles(pool, **layout) for pool in pools]
    return [batch.pool(p) for p in range(len(batch))]


def tile_batch(
    pools: Sequence[Sequence[np.ndarray]], **layout: Unpack[TileLayout]
) -> TileBatch | None:
    """Every pool's tiles in one pass, ids batch-global; None where the input needs
    ``build_tiles``' checks pool by pool."""
    cp, length, model, h = (layout["cp"], layout["packed_length"], layout["model"],
                            layout["heads_split"])
    seqs = fast_lengths(pools, length) if 0 < cp <= length else None
    if seqs is None:
        return None
    hps, kvh = shard_model(model, h)
    blocks = pool_blocks(seqs, layout["block_size"])
    bounds = np.arange(cp + 1, dtype=np.int64) * length // cp
    q_home = np.repeat(
        blocks.seq * cp + np.searchsorted(bounds, blocks.start, side="right") - 1, h)
    qo_bytes = np.repeat(blocks.tokens * hps * model.head_dim * model.dtype_bytes, h)
    group_ptr, group_ids = tile_groups(blocks.seg_sample, blocks.seg_count, h)
    lengths = np.concatenate(seqs)
    kv_bpt = 2 * kvh * model.head_dim * model.dtype_bytes
    hold = holdings(seqs, cp, length)
    # Pool boundaries in sequences, samples, tiles and holdings rows.
    seq_ptr = csr_ptr(np.array([len(pool) for pool in pools], dtype=np.int64))
    sample_ptr = csr_ptr(np.array([s.size for s in seqs], dtype=np.int64))[seq_ptr]
    tiles = TileSet(
        seq=np.repeat(blocks.seq, h),
        block=np.repeat(blocks.local, h),
        shard=np.tile(np.arange(h, dtype=np.int64), blocks.seq.size),
        flops=np.repeat(blocks.pairs * hps, h),
        doc_len=np.repeat(blocks.doc_len, h),
        q_home=q_home,
        q_bytes=qo_bytes,
        o_bytes=qo_bytes,
        group_ptr=group_ptr,
        group_ids=group_ids,
        group_bytes=np.repeat(lengths, h) * kv_bpt,
        sample_lengths=lengths,
        holdings=hold,
        heads_split=h,
        heads_per_shard=hps,
        kv_bytes_per_token=kv_bpt,
        workers=len(seqs) * cp,
    )
    pools_at = np.stack([seq_ptr, sample_ptr, np.searchsorted(blocks.seq, seq_ptr) * h,
                         np.searchsorted(hold.sample, sample_ptr)], axis=1)
    return TileBatch(tiles, pools_at, cp)
