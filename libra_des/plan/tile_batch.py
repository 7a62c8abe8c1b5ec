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

Input checks are those of ``build_tiles``: a batch that fails the fast check (all one-
dimensional int64 arrays, positive lengths, every sequence within the packed length) is
checked pool by pool, which raises the per-pool error.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import TypeVar, Unpack

import numpy as np

from libra_des.errors import InputError
from libra_des.plan.balancers import registry as training_balancers
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
    if policy not in training_balancers.tap_users():
        raise InputError("policy", policy, " | ".join(training_balancers.tap_users()))
    check_chunks(chunks, shard_model(layout["model"], layout["heads_split"])[0])
    began = time.perf_counter()
    tile_sets = build_tiles_many(pools, **layout)
    share = (time.perf_counter() - began) / max(len(tile_sets), 1)
    return (plan_tiles(tiles, slack=slack, chunks=chunks, policy=policy,
                       began=time.perf_counter() - share)
            for tiles in tile_sets)


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


def build_tiles_many(
    pools: Sequence[Sequence[np.ndarray]], **layout: Unpack[TileLayout]
) -> list[TileSet]:
    """``[build_tiles(seqs, **layout) for seqs in pools]``, the same tile sets, in one pass."""
    cp, length, model, h = (layout["cp"], layout["packed_length"], layout["model"],
                            layout["heads_split"])
    seqs = fast_lengths(pools, length) if 0 < cp <= length else None
    if seqs is None:  # build_tiles names the error (or takes the unusual input)
        return [build_tiles(pool, **layout) for pool in pools]
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
    seq, block = np.repeat(blocks.seq, h), np.repeat(blocks.local, h)
    shard = np.tile(np.arange(h, dtype=np.int64), blocks.seq.size)
    flops, doc_len = np.repeat(blocks.pairs * hps, h), np.repeat(blocks.doc_len, h)
    group_bytes = np.repeat(lengths, h) * kv_bpt
    # Pool boundaries in sequences, samples, tiles and holdings rows.
    seq_ptr = csr_ptr(np.array([len(pool) for pool in pools], dtype=np.int64))
    sample_ptr = csr_ptr(np.array([s.size for s in seqs], dtype=np.int64))[seq_ptr]
    tile_ptr = np.searchsorted(blocks.seq, seq_ptr) * h
    hold_ptr = np.searchsorted(hold.sample, sample_ptr)
    out = []
    for p in range(len(pools)):
        s0, j0, j1 = int(seq_ptr[p]), int(sample_ptr[p]), int(sample_ptr[p + 1])
        t0, t1 = int(tile_ptr[p]), int(tile_ptr[p + 1])
        r0, r1 = int(hold_ptr[p]), int(hold_ptr[p + 1])
        g0, g1 = int(group_ptr[t0]), int(group_ptr[t1])
        out.append(TileSet(
            seq=seq[t0:t1] - s0,
            block=block[t0:t1],
            shard=shard[t0:t1],
            flops=flops[t0:t1],
            doc_len=doc_len[t0:t1],
            q_home=q_home[t0:t1] - s0 * cp,
            q_bytes=qo_bytes[t0:t1].copy(),
            o_bytes=qo_bytes[t0:t1].copy(),
            group_ptr=group_ptr[t0:t1 + 1] - g0,
            group_ids=group_ids[g0:g1] - j0 * h,
            group_bytes=group_bytes[j0 * h:j1 * h],
            sample_lengths=lengths[j0:j1],
            holdings=Holdings(hold.sample[r0:r1] - j0, hold.worker[r0:r1] - s0 * cp,
                              hold.tokens[r0:r1]),
            heads_split=h,
            heads_per_shard=hps,
            kv_bytes_per_token=kv_bpt,
            workers=len(pools[p]) * cp,
        ))
    return out
