"""Fast paths of the MoE planners equal their plain definitions (same numbers, not close)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import predictors as reference

from libra_des.plan.moe import static_home
from libra_des.plan.moe.assignment import (
    dispatch_matrix,
    materialise,
    origin_counts,
    split_evenly,
)
from libra_des.plan.moe.harmoeny import harmoeny_moves
from libra_des.plan.moe.sharding import shard_remote_tokens
from libra_des.workload.miss_kernel import mark_misses
from libra_des.workload.predictors import (
    confusion,
    replace_misses,
    topk_agreement,
)


def plain_materialise(routed: np.ndarray, origin: np.ndarray, load: np.ndarray) -> np.ndarray:
    """Pair by pair: in (expert, origin, token) order the first min(count, load) pairs of an
    (expert, origin) stay home; an expert's other pairs fill its GPUs' residual demand."""
    tokens, k = routed.shape
    gpus, experts = load.shape
    counts = origin_counts(routed, origin, gpus, experts)
    keep = np.minimum(counts, load)
    residual = load - keep
    dest = np.empty((tokens, k), dtype=np.int64)
    for e in range(experts):
        stayed = np.zeros(gpus, dtype=np.int64)
        spill_to = np.repeat(np.arange(gpus), residual[:, e]).tolist()
        for o in range(gpus):
            for t in range(tokens):
                if origin[t] != o:
                    continue
                for slot in np.flatnonzero(routed[t] == e):
                    if stayed[o] < keep[o, e]:
                        dest[t, slot] = o
                        stayed[o] += 1
                    else:
                        dest[t, slot] = spill_to.pop(0)
    return dest


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31), st.sampled_from([2, 4, 8]), st.sampled_from(["libra", "eplb",
                                                                           "harmoeny"]),
       st.booleans())
def test_materialise_equals_the_pair_by_pair_rule(
    seed: int, gpus: int, planner: str, sorted_origins: bool
) -> None:
    rng = np.random.default_rng(seed)
    experts, tokens, k = 2 * gpus, 40, 3
    routed = np.argsort(rng.random((tokens, experts)) * rng.random(experts) ** 2, axis=1)[:, :k]
    origin = rng.integers(0, gpus, tokens)
    if sorted_origins:  # the DP / TP attention layout takes the expert-only sort
        origin = np.sort(origin)
    counts, home = origin_counts(routed, origin, gpus, experts), static_home(experts, gpus)
    if planner == "libra":
        load = shard_remote_tokens(counts, home | (rng.random(home.shape) < 0.3), home, 0.0).load
    elif planner == "eplb":
        load = split_evenly(counts.sum(axis=0), 1 + rng.integers(0, 3, home.shape) * home)
    else:
        load = harmoeny_moves(counts, home, 0.0).load
    assert np.array_equal(materialise(routed, origin, load), plain_materialise(routed, origin,
                                                                                load))


@pytest.mark.parametrize("gpus", [3, 12, 13, 40])  # bit-pattern counting up to 12 GPUs
def test_dispatch_bytes_match_a_brute_force_count_at_any_size(gpus: int) -> None:
    rng = np.random.default_rng(gpus)
    tokens = 300
    dest = rng.integers(0, gpus, (tokens, 4))
    origin = rng.integers(0, gpus, tokens)
    expected = np.zeros((gpus, gpus))
    for t in range(tokens):
        for d in set(dest[t].tolist()) - {int(origin[t])}:
            expected[origin[t], d] += 2.5
    assert np.array_equal(dispatch_matrix(dest, origin, gpus, 2.5), expected)


@pytest.mark.parametrize("experts", [5, 64, 130])
def test_expert_sets_match_a_membership_table(experts: int) -> None:
    rng = np.random.default_rng(experts)
    rows, k = 50, min(4, experts)
    members = np.argsort(rng.random((rows, experts)), axis=1)[:, :k]
    table = np.zeros((rows, experts), dtype=bool)
    table[np.arange(rows)[:, None], members] = True
    sets = reference.ExpertSets.of(members, experts)
    for _ in range(5):
        who, what = rng.permutation(rows)[:20], rng.integers(0, experts, 20)
        assert np.array_equal(sets.has(who, what), table[who, what])
        sets.add(who, what)
        table[who, what] = True
    assert np.array_equal(sets.dense(np.arange(rows), experts), table)


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 200), st.integers(1, 8), st.integers(0, 2**32 - 1))
def test_agreement_equals_the_sorted_union_count(tokens: int, k: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    experts = k + int(rng.integers(0, 3 * k))  # few spare experts: many hits, some misses
    routed = np.argsort(rng.random((tokens, experts)), axis=1)[:, :k].astype(np.int16)
    predicted = np.argsort(rng.random((tokens, experts)), axis=1)[:, :k]
    keep = rng.random(tokens) < 0.5  # half the rows predicted exactly, in another order
    predicted[keep] = routed[keep][:, ::-1]
    both = np.concatenate([predicted.astype(np.int32), routed.astype(np.int32)], axis=1)
    both.sort(axis=1)  # distinct ids per side: every repeat in a row of the union is a hit
    want = int(np.count_nonzero(both[:, 1:] == both[:, :-1])) / predicted.size
    assert topk_agreement(predicted, routed) == want


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 300), st.integers(1, 8), st.floats(0.0, 1.0), st.booleans(),
       st.booleans(), st.integers(0, 2**32 - 1))
def test_miss_replacement_draws_what_the_reference_draws(
    tokens: int, k: int, accuracy: float, popular: bool, with_substitute: bool, seed: int
) -> None:
    # Few experts beside k force collisions, so every path (substitutes, rejection rounds,
    # the exact fallback) runs; the generators must also end in the same state.
    rng = np.random.default_rng(seed)
    experts = k + int(rng.integers(1, 2 * k + 2))
    routed = np.argsort(rng.random((tokens, experts)), axis=1)[:, :k].astype(np.int64)
    miss = rng.random(routed.shape) >= accuracy
    weights = (np.bincount(routed.ravel(), minlength=experts) + 1.0 if popular
               else np.ones(experts))
    weights = weights / weights.sum()
    substitute = confusion(weights, rng) if with_substitute else None
    ref_rng, fast_rng = np.random.default_rng(seed + 1), np.random.default_rng(seed + 1)
    ref = reference.replace_misses(routed, miss, weights, ref_rng, substitute)
    fast = replace_misses(routed, miss, weights, fast_rng, substitute)
    assert np.array_equal(ref, fast) and ref.dtype == fast.dtype
    assert np.array_equal(fast[~miss], routed[~miss])
    assert ref_rng.bit_generator.state == fast_rng.bit_generator.state


@pytest.mark.parametrize("experts", [8, 64, 65, 200])
def test_expert_sets_hold_their_members(experts: int) -> None:
    rng = np.random.default_rng(experts)
    members = np.argsort(rng.random((50, experts)), axis=1)[:, :6].astype(np.int16)
    sets = reference.ExpertSets.of(members, experts)
    table = np.zeros((50, experts), dtype=bool)
    table[np.arange(50)[:, None], members] = True
    assert np.array_equal(sets.dense(np.arange(50), experts), table)


@pytest.mark.parametrize("dtype", [np.int16, np.int64])
def test_misses_are_independent_slots_and_counts_every_slot(dtype: type) -> None:
    """The counts are every routed slot; the misses are independent slots at rate
    ``1 - accuracy``: the rate overall and per column, and the gaps between misses
    geometric (their mean and their share of zero gaps), within 5 standard errors."""
    rng = np.random.default_rng(7)
    routed = np.argsort(rng.random((3000, 40)), axis=1)[:, :8].astype(dtype)
    counts = np.zeros(40, dtype=np.int64)
    acc = 0.7
    misses = [mark_misses(rng, routed, acc, counts) for _ in range(20)]
    assert np.array_equal(counts, 20 * np.bincount(routed.ravel(), minlength=40))
    miss = np.stack(misses)
    p, n = 1.0 - acc, miss.size
    assert abs(miss.mean() - p) < 5 * np.sqrt(p * acc / n)
    per_column = miss.mean(axis=(0, 1))
    assert np.all(np.abs(per_column - p) < 5 * np.sqrt(p * acc / (n / 8)))
    gaps = np.diff(np.flatnonzero(miss[0].ravel())) - 1  # hits between two misses
    assert abs(gaps.mean() - acc / p) < 5 * np.sqrt(acc / p**2 / gaps.size)
    assert abs((gaps == 0).mean() - p) < 5 * np.sqrt(p * acc / gaps.size)


def test_misses_at_the_edges_and_by_seed() -> None:
    routed = np.zeros((100, 4), dtype=np.int16)
    counts = np.zeros(1, dtype=np.int64)
    rng = np.random.default_rng(0)
    assert not mark_misses(rng, routed, 1.0, counts).any()
    assert mark_misses(rng, routed, 0.0, counts).all()
    assert mark_misses(rng, routed, float("nan"), counts).all()
    assert counts[0] == 3 * routed.size
    one, two = (mark_misses(np.random.default_rng(3), routed, 0.9, counts) for _ in range(2))
    assert np.array_equal(one, two) and one.any() and not one.all()
