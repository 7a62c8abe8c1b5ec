"""Node-aware replication and sharding, HarMoEny's host fetch, cost provenance."""

from __future__ import annotations

import numpy as np
import pytest

from libra_des.plan.moe.assignment import static_home
from libra_des.plan.moe.replication import libra_replicas
from libra_des.plan.moe.sharding import shard_remote_tokens
from libra_des.sim.moe.cpu import collective_provenance
from libra_des.sim.moe.host import HostPrices, greedy_moves, replica_placement

NODE = np.arange(16) // 8


def skewed_counts(rng: np.random.Generator) -> np.ndarray:
    weights = rng.zipf(1.6, 128).astype(float)
    return rng.poisson(weights[None, :] * 40, size=(16, 128))


def test_phase_two_replicas_stay_on_the_home_node() -> None:
    rng = np.random.default_rng(1)
    home = static_home(128, 16)
    home_node = NODE[home.argmax(axis=0)]
    gain = []
    for _ in range(5):
        counts = skewed_counts(rng)
        plain = libra_replicas(counts, home, 4, 0.0)
        aware = libra_replicas(counts, home, 4, 0.0, NODE)
        gpu, expert = np.nonzero(aware)
        g0, e0 = np.nonzero(plain)
        # Same-node share of the copies (slots on the hot node run out, so not all of them).
        gain.append((NODE[gpu] == home_node[expert]).mean() - (NODE[g0] == home_node[e0]).mean())
        assert aware.sum() >= plain.sum()
    assert min(gain) > 0 and np.mean(gain) > 0.1


def test_phase_one_copies_stay_inside_the_node() -> None:
    rng = np.random.default_rng(4)
    home = static_home(128, 16)
    counts = skewed_counts(rng)
    phase1 = libra_replicas(counts, home, 4, 1.0, NODE)
    gpu, expert = np.nonzero(phase1)
    assert gpu.size > 0
    assert (NODE[gpu] == NODE[home.argmax(axis=0)][expert]).all()


def test_single_node_results_do_not_change() -> None:
    rng = np.random.default_rng(2)
    home = static_home(128, 8)
    counts = rng.poisson(5.0, size=(8, 128)) * (1 + 10 * (np.arange(128) < 4))
    one = np.zeros(8, dtype=np.int64)
    assert np.array_equal(libra_replicas(counts, home, 8, 0.5),
                          libra_replicas(counts, home, 8, 0.5, one))
    holders = home | libra_replicas(counts, home, 8, 0.5)
    a = shard_remote_tokens(counts, holders, home)
    b = shard_remote_tokens(counts, holders, home, node=one)
    assert np.array_equal(a.load, b.load) and a.iterations == b.iterations


def test_sharding_conserves_pairs_across_nodes() -> None:
    rng = np.random.default_rng(3)
    home = static_home(128, 16)
    counts = skewed_counts(rng)
    holders = home | libra_replicas(counts, home, 8, 0.5, NODE)
    res = shard_remote_tokens(counts, holders, home, node=NODE)
    assert np.array_equal(res.load.sum(axis=0), counts.sum(axis=0))
    assert (res.load[~holders] == 0).all()
    start = shard_remote_tokens(counts, holders, home, max_iterations=0).load.sum(axis=1)
    assert res.load.sum(axis=1).max() <= start.max()


def test_cpu_costs_and_provenance() -> None:
    price = HostPrices.of(None).seconds
    assert price(greedy_moves(8, 128, 10)) > price(greedy_moves(8, 128, 0)) > 0
    # A fixed pass over the [G, E] counts, then a cost per replica placed.
    step = price(replica_placement(8, 128, 64)) - price(replica_placement(8, 128, 63))
    assert step == pytest.approx(price(replica_placement(8, 128, 33))
                                 - price(replica_placement(8, 128, 32)))
    assert price(replica_placement(8, 128, 0)) > 0
    fits = [("all_gather", 8, 8)]
    assert collective_provenance(fits, "all_gather", 8, 8) == "measured"
    assert collective_provenance(fits, "all_gather", 16, 8) == "borrowed"
    assert collective_provenance(fits, "all_to_all", 8, 8) == "assumed"


def test_multinode_scenarios_elaborate() -> None:
    """Every multi-node EP scenario loads, spans its nodes and fits in device memory."""
    from pathlib import Path

    from libra_des.config import load_scenario
    from libra_des.hardware.fabric.topology import load_topology
    from libra_des.sim.moe.setup import check_memory, ep_group

    found = sorted((Path(__file__).resolve().parents[1] / "scenarios").glob("moe-ep-*node-*.yaml"))
    assert len(found) == 4
    for path in found:
        sc = load_scenario(path)
        topo = load_topology(sc.topology, sc.topology_params)
        group = ep_group(sc, topo)
        assert group.gpus == sc.parallelism.ep > group.gpus_per_node == 8
        check_memory(sc, group.gpus, topo.spec.gpu)
