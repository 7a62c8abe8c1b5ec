"""TAP's kernels against the plain numpy copies of tests/reference/tap.py: the placement
(the same integers: ties, loads and Δcomm in int64, capacity tests in float64), the KV
exchange, the batched block table against per-sequence segments."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference.tap import exchange_reference, place_reference

from libra_des.config import ModelSpec
from libra_des.plan import tap_kernel
from libra_des.plan.attention import block_doc_len, per_block, segments
from libra_des.plan.tap import (
    Blocks,
    ExchangePlan,
    Placement,
    TileSet,
    build_tiles,
    csr_ptr,
    exchange_plan,
    int64s,
    place,
    pool_blocks,
)

# heads_q 8 so that H in {1, 2, 4, 8} divides it; GQA with 2 KV heads (replicated when H > 2).
MODEL = ModelSpec(name="k", layers=1, hidden=64, heads_q=8, heads_kv=2, head_dim=4, ffn=64,
                  dtype_bytes=2)


def same(a: Placement, b: Placement) -> None:
    for name in ("worker", "loads", "delta", "order"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    assert a.capacity == b.capacity


def random_tiles(rng: np.random.Generator, seqs: int, cp: int, h: int, block: int,
                 length: int, equal: bool) -> TileSet:
    pool = []
    for _ in range(seqs):
        if equal:  # identical samples: many exact ties in Δcomm and load
            lens = np.full(length // block, block, dtype=np.int64)
        else:
            raw = rng.integers(1, max(2, length // 3), size=64)
            lens = raw[np.cumsum(raw) <= length]
            lens = lens if lens.size else np.array([length])
        pool.append(lens)
    return build_tiles(pool, cp=cp, model=MODEL, heads_split=h, block_size=block,
                       packed_length=length)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    seqs=st.integers(1, 6),
    cp=st.sampled_from([1, 2, 4, 8]),
    h=st.sampled_from([1, 2, 4, 8]),
    block=st.sampled_from([1, 7, 64, 512]),
    slack=st.sampled_from([0.0, 0.03, 0.5]),
    extra=st.integers(0, 3),
    equal=st.booleans(),
)
def test_place_equals_reference(seed: int, seqs: int, cp: int, h: int,
                                                   block: int, slack: float, extra: int,
                                                   equal: bool) -> None:
    rng = np.random.default_rng(seed)
    tiles = random_tiles(rng, seqs, cp, h, block, 2048, equal)
    workers = tiles.workers + extra  # spare workers that hold nothing
    same(place(tiles, workers, slack), place_reference(tiles, workers, slack))


def test_place_equals_reference_on_a_large_pool() -> None:
    rng = np.random.default_rng(3)
    tiles = random_tiles(rng, 8, 8, 8, 1024, 65_536, equal=False)
    assert len(tiles) > 2048
    same(place(tiles, 64, 0.03), place_reference(tiles, 64, 0.03))


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    seqs=st.integers(1, 6),
    cp=st.sampled_from([1, 2, 4, 8]),
    h=st.sampled_from([1, 2, 8]),
    block=st.sampled_from([1, 7, 64, 512]),
    extra=st.integers(0, 2),
)
def test_exchange_equals_reference(seed: int, seqs: int, cp: int, h: int, block: int,
                                        extra: int) -> None:
    rng = np.random.default_rng(seed)
    tiles = random_tiles(rng, seqs, cp, h, block, 2048, equal=False)
    placement = place(tiles, tiles.workers + extra, 0.03)
    got, want = exchange_plan(tiles, placement), exchange_reference(tiles, placement)
    for name in ExchangePlan.__dataclass_fields__:
        assert np.array_equal(getattr(got, name), getattr(want, name)), name


@pytest.mark.parametrize("extra", [0, 50])
def test_exchange_equals_reference_past_64_workers(extra: int) -> None:
    """80 and 130 workers: a group's destinations take two and three words of bits."""
    rng = np.random.default_rng(11)
    tiles = random_tiles(rng, 10, 8, 2, 64, 2048, equal=False)
    placement = place(tiles, tiles.workers + extra, 0.03)
    got, want = exchange_plan(tiles, placement), exchange_reference(tiles, placement)
    assert np.count_nonzero(got.dispatch[:, 64:]) > 0  # destinations past the first word
    for name in ExchangePlan.__dataclass_fields__:
        assert np.array_equal(getattr(got, name), getattr(want, name)), name
    # The batch planner's matrices from the placement alone (a group's destinations as bits).
    hold, workers = tiles.holdings, int(placement.loads.shape[0])
    hold_ptr = csr_ptr(np.bincount(hold.sample, minlength=tiles.sample_lengths.size))
    dispatch, ret = tap_kernel.pair_bytes(
        int64s(tiles.group_ptr), int64s(tiles.group_ids), int64s(placement.worker),
        tiles.num_groups, int(tiles.heads_split), hold_ptr, int64s(hold.worker),
        int64s(hold.tokens), int(tiles.kv_bytes_per_token), int64s(tiles.q_home),
        int64s(tiles.q_bytes), int64s(tiles.o_bytes), workers)
    assert np.array_equal(dispatch, want.dispatch) and np.array_equal(ret, want.ret)


def test_place_falls_back_when_every_worker_is_full() -> None:
    """Zero slack and one heavy tile per worker: later tiles find no candidate, so the
    (load, Δcomm, id) fallback runs, on ties of equal loads."""
    rng = np.random.default_rng(11)
    tiles = random_tiles(rng, 3, 4, 2, 64, 2048, equal=True)
    same(place(tiles, tiles.workers + 2, 0.0), place_reference(tiles, tiles.workers + 2, 0.0))


def blocks_one_by_one(lens_list: list[np.ndarray], block_size: int) -> Blocks:
    """The block table built sequence by sequence with ``segments`` (the former code)."""
    rows = []
    first_sample = 0
    for p, lens in enumerate(lens_list):
        seg = segments(lens, block_size)
        rows.append((np.full(seg.blocks, p, dtype=np.int64), np.arange(seg.blocks, dtype=np.int64),
                     seg.block_starts, seg.block_ends - seg.block_starts,
                     per_block(seg, seg.pairs), block_doc_len(seg, lens),
                     seg.sample + first_sample, np.bincount(seg.block, minlength=seg.blocks)))
        first_sample += lens.size
    return Blocks(*(np.concatenate(col) for col in zip(*rows, strict=True)))


@settings(max_examples=60, deadline=None)
@given(
    seqs=st.lists(st.lists(st.integers(1, 5000), min_size=0, max_size=12), min_size=1,
                  max_size=5),
    block=st.sampled_from([1, 3, 64, 1000, 4096]),
)
def test_pool_blocks_equal_per_sequence_segments(seqs: list[list[int]], block: int) -> None:
    lens_list = [np.array(s, dtype=np.int64) for s in seqs]
    got, want = pool_blocks(lens_list, block), blocks_one_by_one(lens_list, block)
    for name in Blocks.__dataclass_fields__:
        x, y = getattr(got, name), getattr(want, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name
