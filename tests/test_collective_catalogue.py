"""One collective catalogue: each algorithm's transfer DAG moves what its alpha-beta shape says,
the flow model runs the DAG of the algorithm asked for, and both network models answer the
same protocol."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import simpy

from libra_des.errors import InputError
from libra_des.hardware.collectives import curves as collectives
from libra_des.hardware.collectives.collective_catalogue import (
    CATALOGUE,
    COMPOSED_OPS,
    DAG_ALGORITHMS,
    DEFAULT_ALGORITHM,
    FLAT_ALGORITHMS,
    SHAPES,
    Algorithm,
    rail_rings,
    transfer_dag,
)
from libra_des.hardware.collectives.hierarchy import bytes_per_rank, decompose, level_ranks
from libra_des.hardware.costs import CostModel
from libra_des.hardware.fabric.topology import load_topology
from libra_des.hardware.profiles.profile import load_profile
from libra_des.sim.moe.layer import SharedLink
from libra_des.sim.network.analytic import AnalyticNetwork
from libra_des.sim.network.flow.flow_model import Network
from libra_des.sim.network.model import NetworkModel, Traffic

WITH_DAG = [a for a in CATALOGUE if a.dag is not None]
SIZES = (1.0, 4096.0, 3e6 + 7.0)
MB = 1 << 20


def group_sizes(a: Algorithm) -> list[int]:
    return [2] if a.op == "send_recv" else list(range(2, 10))


def sent_per_rank(transfers: list[tuple[int, int, float]], n: int) -> np.ndarray:
    out = np.zeros(n)
    for src, _dst, nbytes in transfers:
        out[src] += nbytes
    return out


def depth(deps: list[list[int]]) -> int:
    """Transfers on the longest dependency chain (deps always point to earlier transfers)."""
    level: list[int] = []
    for before in deps:
        level.append(1 + max((level[j] for j in before), default=0))
    return max(level, default=0)


@pytest.mark.parametrize("gpus_per_node", [0, 2, 3], ids=lambda g: f"gpn{g}")
@pytest.mark.parametrize("algorithm", WITH_DAG, ids=lambda a: f"{a.op}-{a.name}")
def test_dag_moves_the_shape_volume_in_the_shape_steps(
    algorithm: Algorithm, gpus_per_node: int
) -> None:
    symmetric = algorithm.op not in ("broadcast", "reduce", "send_recv")
    for n in group_sizes(algorithm):
        volume, steps = algorithm.shape(n)
        for size in SIZES:
            transfers, deps = transfer_dag(algorithm.op, algorithm.name, range(n), size,
                                           chunks=1, gpus_per_node=gpus_per_node)
            sent = sent_per_rank(transfers, n)
            assert sent.max() == pytest.approx(volume * size, rel=1e-12), (n, size)
            if symmetric:  # every rank is the busiest one
                assert sent.min() == pytest.approx(sent.max(), rel=1e-12), (n, size)
            assert all(j < i for i, before in enumerate(deps) for j in before)
            assert depth(deps) == steps, (n, size)


def test_all_to_all_v_sends_each_rank_its_row() -> None:
    matrix = np.arange(16.0).reshape(4, 4)
    transfers, _ = transfer_dag("all_to_all", "direct", [7, 3, 5, 1], 0.0, send_bytes=matrix)
    sent = {g: sum(b for s, _, b in transfers if s == g) for g in (7, 3, 5, 1)}
    assert list(sent.values()) == (matrix.sum(1) - np.diag(matrix)).tolist()


def test_one_catalogue_for_both_models() -> None:
    assert collectives.SHAPES is SHAPES and collectives.FLAT_ALGORITHMS is FLAT_ALGORITHMS
    assert set(SHAPES) == {(a.op, a.name) for a in CATALOGUE}
    for op, algs in FLAT_ALGORITHMS.items():
        assert DEFAULT_ALGORITHM[op] == algs[0] and algs[0] in DAG_ALGORITHMS[op]
        assert set(DAG_ALGORITHMS[op]) <= set(algs)


def test_dag_refuses_what_it_cannot_run() -> None:
    with pytest.raises(InputError, match="algorithm"):
        transfer_dag("all_reduce", "nvls", range(4), MB)
    with pytest.raises(InputError, match="op"):
        transfer_dag("gather", "ring", range(4), MB)
    with pytest.raises(InputError, match="send_bytes"):
        transfer_dag("all_gather", "ring", range(2), MB, send_bytes=np.ones((2, 2)))
    with pytest.raises(InputError, match="send_recv"):
        transfer_dag("send_recv", "direct", range(3), MB)


def flow_run(op: str, gpus: list[int], nbytes: float, algorithm: str | None) -> Network:
    env = simpy.Environment()
    net = Network(env, load_topology("h200-8x-nvswitch"))
    env.run(net.collective(op, gpus, nbytes, algorithm=algorithm))
    return net


@pytest.mark.parametrize(("op", "algorithm"), [(a.op, a.name) for a in WITH_DAG
                                               if a.op != "send_recv"])
def test_flow_model_runs_the_algorithm_asked_for(op: str, algorithm: str) -> None:
    n, size = 4, 8 * MB
    net = flow_run(op, list(range(n)), size, algorithm)
    transfers, _ = transfer_dag(op, algorithm, range(n), size)
    assert net.flows_done == len(transfers)
    np.testing.assert_allclose(net.bytes_sent[:n], sent_per_rank(transfers, n))


def test_rail_rings_leave_each_node_on_the_rail_they_enter_the_next() -> None:
    orders = rail_rings([0, 1, 2, 3, 4, 5, 6, 7], 4)
    assert orders[1] == [1, 2, 3, 0, 4, 7, 6, 5]  # node 1 walked backwards: 0 -> 4 same rail
    for order in orders:
        hops = list(zip(order, order[1:] + order[:1], strict=True))
        assert all(a % 4 == b % 4 for a, b in hops if a // 4 != b // 4)
    assert [o[0] % 4 for o in orders] == [0, 1, 2, 3]  # every rail carries one ring
    assert rail_rings([0, 1, 2], 4) == [[0, 1, 2]] and rail_rings([0, 4, 8], 4) == [[0, 4, 8]]


def test_ring_across_nodes_runs_at_the_nodes_nic_rate() -> None:
    # Two rail-optimised nodes of 8 GPUs, one 50 GB/s NIC each: the eight rail rings move
    # the all-gather at 8 NICs' rate, the alpha-beta ring's flat_rate (one ring: 1 NIC's).
    topo = load_topology("h200-roce-railopt", {"nodes": 2})
    env = simpy.Environment()
    net = Network(env, topo)
    size, n = 256 * MB, 16
    env.run(net.collective("all_gather", list(range(n)), size))
    alpha = topo.latency(topo.route(0, 8))
    expected = (n - 1) / n * size / (8 * 50e9)
    assert expected < env.now < expected + (n - 1) * alpha * 1.01


def test_broadcast_algorithm_changes_the_root_load() -> None:
    ring = flow_run("broadcast", [0, 1, 2, 3], 8 * MB, "ring")
    direct = flow_run("broadcast", [0, 1, 2, 3], 8 * MB, "direct")
    assert ring.bytes_sent[0] == pytest.approx(8 * MB)
    assert direct.bytes_sent[0] == pytest.approx(3 * 8 * MB)
    with pytest.raises(InputError, match="algorithm"):
        flow_run("all_reduce", [0, 1], MB, "tree")


@pytest.fixture(scope="module")
def cost() -> CostModel:
    topo = load_topology("h200-8x-nvswitch")
    return CostModel(load_profile("h200-sxm"), topo.fabric())


def test_both_models_answer_the_protocol(cost: CostModel) -> None:
    env = simpy.Environment()
    assert isinstance(AnalyticNetwork(env, cost), NetworkModel)
    assert isinstance(Network(env, load_topology("h200-8x-nvswitch")), NetworkModel)


def analytic(cost: CostModel, ports: bool, start: Any) -> float:
    env = simpy.Environment()
    net = AnalyticNetwork(env, cost, [SharedLink(env) for _ in range(8)] if ports else None)
    env.run(env.all_of(start(net)))
    return float(env.now)


def test_analytic_model_takes_the_cost_model_time(cost: CostModel) -> None:
    solo = cost.collective("all_gather", 64 * MB, 4, 4).seconds
    assert analytic(cost, False, lambda n: [n.collective("all_gather", [0, 1, 2, 3], 64 * MB)]) \
        == pytest.approx(solo, rel=1e-12)
    matrix = np.full((4, 4), float(MB))
    a2a = cost.all_to_allv(matrix, gpus_per_node=4)
    assert analytic(cost, False, lambda n: [n.collective("all_to_all", [0, 1, 2, 3],
                                                         send_bytes=matrix)]) == pytest.approx(a2a)
    p2p = cost.p2p(float(MB), same_node=True)
    got = analytic(cost, False, lambda n: [Traffic.receive(0, [(1, MB), (2, MB)]).start(n)])
    assert got == pytest.approx(2 * p2p)  # one copy engine: the sources one after another


def test_analytic_ports_share_a_gpu_link(cost: CostModel) -> None:
    solo = cost.collective("all_gather", 64 * MB, 4, 4).seconds

    def two(n: AnalyticNetwork) -> list[simpy.Event]:
        return [n.collective("all_gather", [0, 1, 2, 3], 64 * MB),
                n.collective("all_gather", [2, 3, 4, 5], 64 * MB)]

    assert analytic(cost, False, two) == pytest.approx(solo)  # no ports: no contention
    assert analytic(cost, True, two) == pytest.approx(2 * solo)  # GPUs 2, 3 serve both


@pytest.mark.parametrize("op", COMPOSED_OPS)
@pytest.mark.parametrize(("topology", "nodes", "per_node", "algorithm"), [
    ("h200-roce-railopt", 4, 8, "hierarchical"),  # node, network
    ("h100-ib-3tier", 32, 1, "multilevel"),  # leaf groups of 16 nodes, then the spines
    ("h100-ib-3tier", 4, 2, "multilevel"),
])
def test_composed_collectives_move_the_level_steps_bytes(
    op: str, topology: str, nodes: int, per_node: int, algorithm: str
) -> None:
    topo = load_topology(topology, {"nodes": nodes})
    gpus = [node * topo.gpus_per_node + i for node in range(nodes) for i in range(per_node)]
    env = simpy.Environment()
    net = Network(env, topo)
    size = 64 * MB
    env.run(net.collective(op, gpus, size, algorithm=algorithm))
    steps = decompose(op, level_ranks(topo.fabric(), len(gpus), per_node,
                                      algorithm == "multilevel"))
    busiest = bytes_per_rank(steps, size)
    assert net.bytes_sent[gpus].max() == pytest.approx(busiest, rel=1e-12)
    assert net.bytes_received.sum() == pytest.approx(net.bytes_sent.sum(), rel=1e-12)
    n = len(gpus)
    if op == "all_reduce":  # the same bytes as one flat ring (hierarchy.py's telescoping sum)
        assert busiest == pytest.approx(2 * (n - 1) / n * size, rel=1e-12)
        np.testing.assert_allclose(net.bytes_sent[gpus], busiest, rtol=1e-12)


def test_composed_collectives_need_whole_nodes() -> None:
    with pytest.raises(InputError, match="every node"):
        flow_run_on("h200-roce-railopt", [0, 1, 8], "hierarchical")


def flow_run_on(topology: str, gpus: list[int], algorithm: str) -> Network:
    env = simpy.Environment()
    net = Network(env, load_topology(topology, {"nodes": 2}))
    env.run(net.collective("all_reduce", gpus, MB, algorithm=algorithm))
    return net
