"""Tiles of many pools built in one pass (plan/tile_batch.py) against build_tiles per pool,
field by field and bit for bit; the same errors on bad input; the same pool plans."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference.tap import holdings_numpy, tile_groups_numpy

from libra_des.config import ModelSpec
from libra_des.errors import InputError
from libra_des.plan.tap import (
    Holdings,
    TileSet,
    build_tiles,
    plan_pool,
)
from libra_des.plan.tile_batch import (
    BATCH_SEQUENCES,
    attention_plans,
    batches,
    build_tiles_many,
    plan_pools,
)
from libra_des.plan.types import AttentionPlan, PairBytes

MODEL = ModelSpec(name="k", layers=1, hidden=64, heads_q=8, heads_kv=2, head_dim=4, ffn=64,
                  dtype_bytes=2)
LENGTH = 4096


def equal_tiles(a: TileSet, b: TileSet) -> None:
    for f in dataclasses.fields(TileSet):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, Holdings):
            for name in ("sample", "worker", "tokens"):
                u, v = getattr(x, name), getattr(y, name)
                assert u.dtype == v.dtype and u.tobytes() == v.tobytes(), f"holdings.{name}"
        elif isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.shape == y.shape, f.name
            assert x.tobytes() == y.tobytes(), f.name  # bit for bit, floats included
        else:
            assert type(x) is type(y) and x == y, f.name


def random_pool(rng: np.random.Generator, seqs: int) -> list[np.ndarray]:
    pool = []
    for _ in range(seqs):
        raw = rng.integers(1, int(rng.choice([20, 300, LENGTH])), size=80)
        pool.append(raw[np.cumsum(raw) <= LENGTH].astype(np.int64))  # may be empty
    return pool


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    pools=st.integers(1, 5),
    seqs=st.integers(1, 4),
    cp=st.sampled_from([1, 2, 8]),
    h=st.sampled_from([1, 2, 8]),
    block=st.sampled_from([1, 37, 512, 5000]),
)
def test_batch_equals_per_pool(seed: int, pools: int, seqs: int, cp: int, h: int,
                               block: int) -> None:
    rng = np.random.default_rng(seed)
    batch = [random_pool(rng, int(rng.integers(1, seqs + 1))) for _ in range(pools)]
    kw = dict(cp=cp, model=MODEL, heads_split=h, block_size=block, packed_length=LENGTH)
    got = build_tiles_many(batch, **kw)  # type: ignore[arg-type]
    assert len(got) == pools
    for pool, tiles in zip(batch, got, strict=True):
        equal_tiles(tiles, build_tiles(pool, **kw))  # type: ignore[arg-type]


def test_bad_input_raises_the_per_pool_error() -> None:
    kw = dict(cp=2, model=MODEL, heads_split=2, block_size=64, packed_length=LENGTH)
    good = [np.array([100, 200], dtype=np.int64)]
    for bad in ([np.array([LENGTH, 1], dtype=np.int64)], [np.array([5, 0], dtype=np.int64)], []):
        with pytest.raises(InputError) as want:
            build_tiles(bad, **kw)  # type: ignore[arg-type]
        with pytest.raises(InputError) as got:
            build_tiles_many([good, bad], **kw)  # type: ignore[arg-type]
        assert str(got.value) == str(want.value)
    # Lists (not int64 arrays) take the per-pool path: the same tiles.
    equal_tiles(build_tiles_many([[[100, 200]]], **kw)[0],  # type: ignore[arg-type]
                build_tiles(good, **kw))  # type: ignore[arg-type]


def test_plan_pools_equal_plan_pool_and_batches_cover_all() -> None:
    rng = np.random.default_rng(3)
    batch = [random_pool(rng, 3) for _ in range(4)]
    kw = dict(cp=2, model=MODEL, heads_split=2, block_size=256, packed_length=LENGTH,
              slack=0.03, chunks=2, policy="libra")
    got = plan_pools(batch, **kw)  # type: ignore[arg-type]
    for pool, plan in zip(batch, got, strict=True):
        want = plan_pool(pool, **kw)  # type: ignore[arg-type]
        assert np.array_equal(plan.placement.worker, want.placement.worker)
        assert plan.attention.worker_pairs.tobytes() == want.attention.worker_pairs.tobytes()
        assert plan.attention.worker_doc_len.tobytes() == (
            want.attention.worker_doc_len.tobytes())
        assert np.array_equal(plan.attention.dispatch_bytes, want.attention.dispatch_bytes)
    # Batches cover every pool in order, at most BATCH_SEQUENCES sequences each (a wider
    # pool alone).
    items = [[0] * n for n in (8,) * 40 + (BATCH_SEQUENCES + 1, 3, BATCH_SEQUENCES, 1)]
    got = list(batches(items))
    assert [x for b in got for x in b] == items
    assert all(sum(map(len, b)) <= BATCH_SEQUENCES or len(b) == 1 for b in got)
    assert len(got[0]) == BATCH_SEQUENCES // 8
    assert [len(b) for b in got[-4:]] == [1, 1, 1, 1]


@settings(max_examples=40, deadline=None)
@given(counts=st.lists(st.integers(0, 9), min_size=0, max_size=30),
       h=st.sampled_from([1, 2, 3, 8]), seed=st.integers(0, 2**16))
def test_tile_groups_kernel_equals_reference(counts: list[int], h: int, seed: int) -> None:
    from libra_des.plan import tap_kernel

    seg_count = np.array(counts, dtype=np.int64)
    seg_sample = np.random.default_rng(seed).integers(0, 1000, size=int(seg_count.sum()))
    got = tap_kernel.tile_groups(seg_sample, seg_count, h)
    want = tile_groups_numpy(seg_sample, seg_count, h)
    for x, y in zip(got, want, strict=True):
        assert x.dtype == y.dtype and np.array_equal(x, y)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), seqs=st.integers(1, 5), cp=st.sampled_from([1, 2, 3, 8]),
       length=st.sampled_from([8, 100, 4096]))
def test_holdings_kernel_equals_reference(seed: int, seqs: int, cp: int, length: int) -> None:
    from libra_des.plan import tap_kernel

    rng = np.random.default_rng(seed)
    pool = []
    for _ in range(seqs):
        raw = rng.integers(1, int(rng.choice([2, 10, length])) + 1, size=40)
        pool.append(raw[np.cumsum(raw) <= length].astype(np.int64))  # may be empty
    sizes = np.array([s.size for s in pool], dtype=np.int64)
    lens = np.concatenate(pool) if pool else np.zeros(0, dtype=np.int64)
    got = tap_kernel.holdings(lens, sizes, cp, length)
    want = holdings_numpy(pool, cp, length)
    for x, name in zip(got, ("sample", "worker", "tokens"), strict=True):
        y = getattr(want, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), tiles=st.integers(0, 300), workers=st.integers(1, 9))
def test_worker_work_kernel_equals_bincount(seed: int, tiles: int, workers: int) -> None:
    from libra_des.plan import tap_kernel

    rng = np.random.default_rng(seed)
    worker = rng.integers(0, workers, size=tiles)
    flops = rng.integers(0, 2**40, size=tiles)
    doc_len = rng.random(tiles) * rng.integers(1, 10**6)
    weight, pairs = tap_kernel.worker_work(worker, flops, doc_len, workers)
    f = flops.astype(np.float64)
    assert weight.tobytes() == np.bincount(worker, f * doc_len, minlength=workers).tobytes()
    assert pairs.tobytes() == np.bincount(worker, f, minlength=workers).tobytes()


def equal_plans(a: AttentionPlan, b: AttentionPlan) -> None:
    for f in dataclasses.fields(AttentionPlan):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, PairBytes):
            assert x.workers == y.workers, f.name
            for part in ("flat", "values"):
                u, v = getattr(x, part), getattr(y, part)
                assert u.dtype == v.dtype and u.tobytes() == v.tobytes(), f"{f.name}.{part}"
        elif isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), f.name
        else:
            assert type(x) is type(y) and x == y, f.name


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    pools=st.integers(1, 5),
    seqs=st.integers(1, 4),
    cp=st.sampled_from([1, 2, 8]),
    h=st.sampled_from([1, 2, 8]),
    block=st.sampled_from([1, 37, 512, 5000]),
    slack=st.sampled_from([0.0, 0.03, 0.5]),
)
def test_batch_attention_plans_equal_plan_pool(seed: int, pools: int, seqs: int, cp: int,
                                               h: int, block: int, slack: float) -> None:
    # The batch kernel (one compiled call for every pool) against plan_pool pool by pool:
    # every field of every plan bit for bit, the sparse matrices' index types included.
    rng = np.random.default_rng(seed)
    batch = [random_pool(rng, int(rng.integers(1, seqs + 1))) for _ in range(pools)]
    kw = dict(cp=cp, model=MODEL, heads_split=h, block_size=block, packed_length=LENGTH,
              slack=slack, chunks=1, policy="libra")
    got = attention_plans(batch, **kw)  # type: ignore[arg-type]
    assert len(got) == len(batch)
    for pool, plan in zip(batch, got, strict=True):
        equal_plans(plan, plan_pool(pool, **kw).attention)  # type: ignore[arg-type]


def test_batch_attention_plans_check_input_as_plan_pool() -> None:
    kw = dict(cp=2, model=MODEL, heads_split=2, block_size=256, packed_length=LENGTH)
    with pytest.raises(InputError, match="chunks"):
        attention_plans([[np.array([10], dtype=np.int64)]], chunks=3,
                        **kw)  # type: ignore[arg-type]
    with pytest.raises(InputError):  # a sequence longer than L, named by build_tiles
        attention_plans([[np.array([LENGTH + 1], dtype=np.int64)]],
                        **kw)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(
    blocks=st.lists(st.integers(1, 6), min_size=0, max_size=40),
    run=st.integers(1, 4),
    broken=st.booleans(),
)
def test_descending_is_the_stable_argsort(blocks: list[int], run: int, broken: bool) -> None:
    """The kernel's tile order equals numpy's stable argsort of -f, with runs of equal f
    (ties between runs and inside them), and with one run broken (the whole-sort path)."""
    from libra_des.plan.tap_batch_kernel import descending

    f = np.repeat(np.array(blocks, dtype=np.int64), run)
    if broken and f.size > 1:
        f[-1] += 1
    assert descending(f, run).tolist() == np.argsort(-f, kind="stable").tolist()
