"""MoE plans: EPLB known answer, sharding and replication properties."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from libra_des.plan.moe import MoeSetup, rebalance_experts, static_home
from libra_des.plan.moe.assignment import (
    dispatch_matrix,
    materialise,
    origin_counts,
    split_evenly,
)
from libra_des.plan.moe.harmoeny import harmoeny_moves
from libra_des.plan.moe.lina import lina_replicas
from libra_des.plan.moe.replication import libra_replicas
from libra_des.plan.moe.sharding import initial_load, shard_remote_tokens
from libra_des.plan.moe.systems import libra_plan, sglang_plan

WEIGHT = np.array([
    [90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86],
    [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27],
])


def test_eplb_known_answer() -> None:
    phy2log, log2phy, logcnt = rebalance_experts(WEIGHT, 16, 4, 2, 8)
    assert phy2log.tolist() == [
        [5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1],
        [7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1],
    ]
    assert logcnt.tolist() == [
        [1, 2, 1, 1, 2, 2, 1, 1, 1, 1, 2, 1],
        [1, 2, 1, 1, 1, 2, 2, 1, 2, 1, 1, 1],
    ]
    # log2phy inverts phy2log.
    for layer in range(2):
        for e in range(12):
            slots = log2phy[layer, e][log2phy[layer, e] >= 0]
            assert len(slots) == logcnt[layer, e]
            assert np.all(phy2log[layer, slots] == e)


def test_eplb_global_policy_packs_every_gpu_equally() -> None:
    rng = np.random.default_rng(0)
    weight = rng.integers(1, 1000, size=(3, 32))
    phy2log, _, logcnt = rebalance_experts(weight, 40, 2, 4, 8)  # 2 groups, 4 nodes: global
    assert np.all(logcnt.sum(axis=1) == 40)
    assert all(set(row.tolist()) == set(range(32)) for row in phy2log)
    # Load per replica: the hottest expert got replicas first.
    per_replica = weight / logcnt
    assert np.all(per_replica.max(axis=1) <= weight.max(axis=1))


@st.composite
def sharding_case(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    gpus = draw(st.sampled_from([2, 4, 8]))
    experts = gpus * draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    skew = draw(st.floats(0.0, 3.0))
    counts = rng.poisson(np.exp(skew * rng.standard_normal((gpus, experts))) * 20)
    home = static_home(experts, gpus)
    replicas = (rng.random((gpus, experts)) < draw(st.floats(0.0, 0.5))) & ~home
    return counts, home | replicas, home


@settings(max_examples=60, deadline=None)
@given(sharding_case(), st.floats(0.0, 0.2))
def test_sharding_properties(
    case: tuple[np.ndarray, np.ndarray, np.ndarray], tolerance: float
) -> None:
    counts, holders, home = case
    start = initial_load(counts, holders, home)
    result = shard_remote_tokens(counts, holders, home, tolerance)
    load = result.load
    assert np.array_equal(load.sum(axis=0), counts.sum(axis=0)), "pairs per expert conserved"
    assert not np.any((load > 0) & ~holders), "pairs only on GPUs holding the expert"
    assert np.all(load >= counts * holders), "local pairs never move"
    assert load.sum(axis=1).max() <= start.sum(axis=1).max()
    # The maximum never rises along the way either.
    maxima = [shard_remote_tokens(counts, holders, home, tolerance, k).load.sum(axis=1).max()
              for k in range(min(result.iterations, 12) + 1)]
    assert all(b <= a for a, b in pairwise(maxima))


@settings(max_examples=40, deadline=None)
@given(sharding_case(), st.integers(0, 6), st.floats(0.0, 1.0))
def test_replication_respects_slots(
    case: tuple[np.ndarray, np.ndarray, np.ndarray], slots: int, alpha: float
) -> None:
    counts, _, home = case
    for replicas in (libra_replicas(counts, home, slots, alpha),
                     lina_replicas(counts.sum(axis=0), home, slots)):
        assert np.all(replicas.sum(axis=1) <= slots)
        assert not np.any(replicas & home), "a replica never sits on the expert's home"


def test_locality_phase_takes_each_gpus_own_remote_favourites() -> None:
    home = static_home(8, 4)
    counts = np.zeros((4, 8), dtype=np.int64)
    counts[0, 7] = 50  # GPU 0's tokens love expert 7 (home: GPU 3)
    counts[1, 0] = 40
    replicas = libra_replicas(counts, home, slots=2, alpha=0.5)
    assert replicas[0, 7] and replicas[1, 0]


@settings(max_examples=30, deadline=None)
@given(sharding_case())
def test_harmoeny_conserves_and_never_raises_the_max(
    case: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> None:
    counts, _, home = case
    result = harmoeny_moves(counts, home)
    assert np.array_equal(result.load.sum(axis=0), counts.sum(axis=0))
    start_max = (home * counts.sum(axis=0)).sum(axis=1).max()
    assert result.load.sum(axis=1).max() <= start_max
    assert np.array_equal(result.fetched, (result.load > 0) & ~home)


def random_routing(tokens: int, experts: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.argsort(rng.random((tokens, experts)), axis=1)[:, :4]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31), st.sampled_from([2, 4]))
def test_materialise_realises_the_load_exactly(seed: int, gpus: int) -> None:
    experts, tokens = 8, 200
    routed = random_routing(tokens, experts, seed)
    origin = np.arange(tokens) * gpus // tokens
    home = static_home(experts, gpus)
    counts = origin_counts(routed, origin, gpus, experts)
    holders = home | (np.random.default_rng(seed).random((gpus, experts)) < 0.4)
    load = shard_remote_tokens(counts, holders, home, 0.0).load
    dest = materialise(routed, origin, load)
    realised = np.zeros_like(load)
    np.add.at(realised, (dest.ravel(), routed.ravel()), 1)
    assert np.array_equal(realised, load)
    stays = np.bincount((origin[:, None] * experts + routed)[dest == origin[:, None]],
                        minlength=gpus * experts).reshape(gpus, experts)
    assert np.array_equal(stays, np.minimum(counts, load))


def test_dispatch_bytes_match_a_brute_force_count() -> None:
    gpus, experts, tokens = 4, 8, 60
    routed = random_routing(tokens, experts, 7)
    origin = np.arange(tokens) % gpus
    dest = routed * gpus // experts
    expected = np.zeros((gpus, gpus))
    for t in range(tokens):
        for d in set(dest[t].tolist()) - {int(origin[t])}:
            expected[origin[t], d] += 10.0
    assert np.array_equal(dispatch_matrix(dest, origin, gpus, 10.0), expected)


def test_split_evenly_conserves() -> None:
    copies = np.array([[1, 0, 2], [1, 1, 0], [0, 1, 1]])
    totals = np.array([7, 5, 10])
    share = split_evenly(totals, copies)
    assert np.array_equal(share.sum(axis=0), totals)
    assert share[0, 2] == 7 and share[2, 2] == 3  # two copies on GPU 0 take 2/3


def test_libra_oracle_balances_a_skewed_layer() -> None:
    gpus, experts, tokens = 8, 64, 4000
    rng = np.random.default_rng(0)
    pop = np.exp(2.0 * rng.standard_normal(experts))
    routed = np.stack([rng.choice(experts, 4, replace=False, p=pop / pop.sum())
                       for _ in range(tokens)])
    origin = np.arange(tokens) * gpus // tokens
    setup = MoeSetup(static_home(experts, gpus), 8, 0.5, 0.01, 100.0, 1000.0)
    static = sglang_plan(routed, origin, setup)
    libra = libra_plan(routed, origin, routed, setup)
    assert static.load_ratio > 1.5
    assert libra.load_ratio <= 1.05
    assert abs(libra.imbalance - (libra.load_ratio - 1)) < 1e-12
    assert libra.replicas.sum(axis=1).max() <= 8
    assert libra.copy_bytes.sum() == libra.replica_count * 1000.0
