"""The MoE planners' kernels (plan/moe/kernel.py) against the numpy loops of
tests/reference/moe.py: the same replicas, moves and dispatch counts."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from reference import moe as reference

from libra_des.plan.moe import kernel, static_home
from libra_des.plan.moe.assignment import dispatch_matrix, materialise, origin_counts
from libra_des.plan.moe.replication import libra_replicas
from libra_des.plan.moe.sharding import greedy_moves, initial_load
from libra_des.plan.moe.systems import MoeSetup, harmoeny_plan
from libra_des.workload.sampling import Scratch, top_k_ascending


def skewed_routing(
    rng: np.random.Generator, tokens: int, gpus: int, experts: int, k: int, sorted_origins: bool
) -> tuple[np.ndarray, np.ndarray]:
    """``routed[T, k]`` (distinct experts per token, popularity skewed) and token origins."""
    scores = (rng.standard_normal(experts) * 1.5 + rng.gumbel(size=(tokens, experts)))
    routed = top_k_ascending(scores.astype(np.float32), k, Scratch.of(tokens, experts))
    origin = rng.integers(0, gpus, tokens)
    return routed.astype(np.int16), np.sort(origin) if sorted_origins else origin


def fields(plan: object) -> dict[str, object]:
    """Every field of a plan and its dispatch bytes, arrays as (dtype, shape, bytes)."""
    out: dict[str, object] = {}
    names = [f.name for f in dataclasses.fields(plan) if f.name != "dispatch"]  # type: ignore[arg-type]
    for name in [*names, "dispatch_bytes"]:
        value = getattr(plan, name)
        if isinstance(value, np.ndarray):
            value = (value.dtype.str, value.shape, value.tobytes())
        out[name] = value
    return out


CASES = [  # (GPUs, experts, top-k, GPUs per node, sorted origins)
    (8, 128, 8, 0, True), (8, 64, 6, 4, False), (4, 32, 4, 0, False), (16, 64, 4, 8, True),
    (72, 144, 8, 0, False),  # beyond one bit word: the other dispatch count
]


@pytest.mark.parametrize(("gpus", "experts", "k", "per_node", "ordered"), CASES)
def test_kernels_equal_the_numpy_loops(
    gpus: int, experts: int, k: int, per_node: int, ordered: bool
) -> None:
    rng = np.random.default_rng(gpus * 1000 + experts)
    node = None if per_node == 0 else np.arange(gpus) // per_node
    home = static_home(experts, gpus)
    for trial in range(6):
        routed, origin = skewed_routing(rng, 600, gpus, experts, k, ordered)
        counts = reference.origin_counts(routed, origin, gpus, experts)
        assert np.array_equal(origin_counts(routed, origin, gpus, experts), counts)
        slots, alpha = int(rng.integers(1, 6)), float(rng.choice([0.0, 0.5, 1.0]))
        replicas = libra_replicas(counts, home, slots, alpha, node)
        assert np.array_equal(replicas, reference.libra_replicas(counts, home, slots, alpha,
                                                                 node)), trial
        holders = home | replicas
        tolerance = float(rng.choice([0.0, 0.01, 0.1]))
        start = initial_load(counts, holders, home)
        movable = start - counts * holders
        got = greedy_moves(start, movable, holders, tolerance, None, node)
        want_load, want_moves = reference.greedy_moves(start, movable, holders, tolerance,
                                                       None, node)
        assert np.array_equal(got.load, want_load) and got.iterations == want_moves, trial
        setup = MoeSetup(home, slots=slots, alpha=alpha, tolerance=tolerance,
                         token_bytes=4096.0, expert_bytes=1e6, gpus_per_node=per_node)
        plan = harmoeny_plan(routed, origin, setup)
        assert np.array_equal(plan.load.sum(axis=0), counts.sum(axis=0))


def test_dispatch_pairs_equal_materialise_then_count() -> None:
    rng = np.random.default_rng(5)
    for gpus, experts in ((8, 32), (3, 12), (70, 140)):
        routed, origin = skewed_routing(rng, 300, gpus, experts, 4, False)
        counts = origin_counts(routed, origin, gpus, experts)
        # any load conserving every expert's pairs: a random split of each expert's total
        load = np.zeros((gpus, experts), dtype=np.int64)
        for e in range(experts):
            cuts = np.sort(rng.integers(0, counts[:, e].sum() + 1, gpus - 1))
            load[:, e] = np.diff(np.concatenate([[0], cuts, [counts[:, e].sum()]]))
        dest = materialise(routed, origin, load, counts)
        want = dispatch_matrix(dest, origin, gpus, 1.0)
        got = kernel.dispatch_pairs(routed, origin.astype(np.int64), load, counts)
        assert np.array_equal(got, want)
        assert np.array_equal(kernel.origin_counts(routed, origin.astype(np.int64), gpus,
                                                   experts), counts)


def test_replicas_fill_every_useful_slot() -> None:
    """A closed case: one hot expert, remote demand everywhere; phase 2 replicates it on
    every GPU that lacks it (one slot each), in the kernel and in the numpy loop."""
    gpus, experts = 4, 8
    counts = np.zeros((gpus, experts), dtype=np.int64)
    counts[:, 0] = 100  # expert 0 (home: GPU 0) wanted by every GPU
    home = static_home(experts, gpus)
    for replicas in (libra_replicas(counts, home, 1, 0.0),
                     reference.libra_replicas(counts, home, 1, 0.0)):
        assert replicas[:, 0].tolist() == [False, True, True, True]
        assert replicas.sum() == gpus - 1
