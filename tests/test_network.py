"""Flow-level network: closed forms, max-min fairness, conservation, collectives."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from libra_des.config import VarianceSpec
from libra_des.errors import InputError
from libra_des.hardware.topology import Topology, load_topology
from libra_des.hardware.variance import VarianceModel
from libra_des.sim.network import Network, max_min_rates

MB = 1 << 20


def node_spec(latency: str = "0us") -> dict[str, Any]:
    """Two nodes of 4 GPUs on a 100 GB/s NVSwitch, one 100 Gb/s NIC per GPU."""
    return {
        "name": "test",
        "nodes": 2,
        "gpus_per_node": 4,
        "nvlink": {"bandwidth": "100GB/s", "latency": latency},
        "pcie": {"switches": 1, "link": {"type": "pcie", "bandwidth": "64GB/s"}},
        "nic": {"count": 4, "bandwidth": "100Gb/s", "latency": latency},
    }


def run(topo: Topology, start: Any, variance: VarianceModel | None = None) -> tuple[float, Network]:
    """Start transfers/collectives via ``start(net)`` at t=0; return the time they all end."""
    env = simpy.Environment()
    net = Network(env, topo, variance)
    events = start(net)
    env.run(env.all_of(events if isinstance(events, list) else [events]))
    return env.now, net


def ring_all_reduce(n: int, size: float, bw: float, alpha: float) -> float:
    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * size / bw


@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize("size", [1 * MB, 256 * MB])
def test_ring_all_reduce_matches_closed_form_in_a_node(n: int, size: float) -> None:
    topo = load_topology("h200-8x-nvswitch")
    alpha = topo.latency(topo.route(0, 1))  # GPU -> NVSwitch -> GPU
    t, _ = run(topo, lambda net: net.collective("all_reduce", list(range(n)), size))
    assert t == pytest.approx(ring_all_reduce(n, size, 450e9, alpha), rel=0.01)


def test_ring_all_reduce_across_nodes_runs_at_nic_speed() -> None:
    topo = load_topology("h200-roce-railopt", {"nodes": 4})
    ring = [0, 8, 16, 24]  # GPU 0 of each node: one rail, one leaf
    alpha = topo.latency(topo.route(0, 8))
    size = 64 * MB
    t, _ = run(topo, lambda net: net.collective("all_reduce", ring, size))
    assert t == pytest.approx(ring_all_reduce(4, size, 50e9, alpha), rel=0.01)
    assert topo.bottleneck(topo.route(0, 8)) == 50e9


@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter"])
def test_ring_gather_and_scatter_take_n_minus_one_steps(op: str) -> None:
    topo = load_topology("h200-8x-nvswitch")
    alpha, size, n = topo.latency(topo.route(0, 1)), 64 * MB, 8
    t, _ = run(topo, lambda net: net.collective(op, list(range(n)), size))
    assert t == pytest.approx((n - 1) * alpha + (n - 1) / n * size / 450e9, rel=0.01)


def test_pipelined_broadcast_matches_its_closed_form() -> None:
    topo = load_topology("h200-8x-nvswitch")
    alpha, size, n, chunks = topo.latency(topo.route(0, 1)), 64 * MB, 8, 16
    t, _ = run(topo, lambda net: net.collective("broadcast", list(range(n)), size, chunks=chunks))
    assert t == pytest.approx((n - 1 + chunks - 1) * (alpha + size / chunks / 450e9), rel=1e-9)


def test_two_flows_on_one_bottleneck_take_twice_as_long() -> None:
    topo = load_topology(node_spec())
    size = 100 * MB
    alone, _ = run(topo, lambda net: net.transfer(0, 1, size))
    both, _ = run(topo, lambda net: [net.transfer(0, 1, size), net.transfer(0, 2, size)])
    assert alone == pytest.approx(size / 100e9, rel=1e-12)
    assert both == pytest.approx(2 * alone, rel=1e-12)
    # Two GPUs sharing a NIC path would share it; two GPUs on their own rails do not.
    apart, _ = run(topo, lambda net: [net.transfer(0, 4, size), net.transfer(1, 5, size)])
    assert apart == pytest.approx(size / 12.5e9, rel=1e-12)


def test_rates_are_recomputed_when_a_flow_joins_and_leaves() -> None:
    topo = load_topology(node_spec())
    size, bw = 100 * MB, 100e9

    def start(net: Network) -> list[simpy.Event]:
        first = net.transfer(0, 1, size)
        late = net.env.timeout(size / (2 * bw))
        second = net.env.event()
        late.callbacks.append(lambda _e: net.transfer(0, 2, size).callbacks.append(
            lambda _f: second.succeed(net.env.now)))
        first.callbacks.append(lambda _e: times.append(net.env.now))
        return [first, second]

    times: list[float] = []
    end, _ = run(topo, start)
    # First runs alone for S/2B, then both share: first's last S/2 at B/2 takes S/B.
    assert times[0] == pytest.approx(1.5 * size / bw, rel=1e-12)
    # Second sent S/2 while sharing, then the rest alone at B.
    assert end == pytest.approx(2.0 * size / bw, rel=1e-12)


def test_latency_is_paid_once_per_flow() -> None:
    topo = load_topology(node_spec("3us"))
    t, _ = run(topo, lambda net: net.transfer(0, 1, 1e6))
    assert t == pytest.approx(6e-6 + 1e6 / 100e9, rel=1e-12)  # two NVLink hops of 3 us
    zero, _ = run(topo, lambda net: net.transfer(2, 2, 1e6))
    assert zero == 0.0, "a GPU sending to itself uses no link"


def test_heavy_rank_all_to_all_is_slower_than_balanced_with_equal_bytes() -> None:
    topo = load_topology("h200-8x-nvswitch")
    n, total = 8, 512 * MB
    balanced = np.full((n, n), total / (n * (n - 1)))
    np.fill_diagonal(balanced, 0.0)
    heavy = balanced.copy()
    heavy[0, 1:] *= 4.0  # rank 0 sends four times its share...
    heavy[1:, :] *= (total - heavy[0].sum()) / heavy[1:].sum()  # ...and the total is unchanged
    assert heavy.sum() == pytest.approx(balanced.sum())
    gpus = list(range(n))
    t_bal, net_b = run(topo, lambda net: net.collective("all_to_all", gpus, send_bytes=balanced))
    t_heavy, net_h = run(topo, lambda net: net.collective("all_to_all", gpus, send_bytes=heavy))
    assert t_heavy > 1.5 * t_bal
    # Bound by the busiest sender: its bytes over its NVLink port.
    assert t_heavy == pytest.approx(heavy[0].sum() / 450e9 + topo.latency(topo.route(0, 1)))
    for net, matrix in ((net_b, balanced), (net_h, heavy)):
        assert np.allclose(net.bytes_sent[:n], matrix.sum(axis=1))
        assert np.allclose(net.bytes_received[:n], matrix.sum(axis=0))


def test_bytes_are_conserved_for_every_collective() -> None:
    topo = load_topology("h200-roce-railopt", {"nodes": 2})
    rng = np.random.default_rng(3)
    gpus = [0, 3, 8, 12, 15]
    matrix = rng.integers(0, 5 * MB, size=(5, 5)).astype(float)
    expected = {
        "all_reduce": 2 * 4 * 64 * MB,  # 2(n-1) steps, n ranks, S/n each
        "all_gather": 4 * 64 * MB,
        "reduce_scatter": 4 * 64 * MB,
        "broadcast": 4 * 64 * MB,
    }
    for op, total in expected.items():
        _, net = run(topo, lambda net, op=op: net.collective(op, gpus, 64 * MB))
        assert net.bytes_sent.sum() == pytest.approx(total)
        assert net.bytes_received.sum() == pytest.approx(total)
    _, net = run(topo, lambda net: net.collective("all_to_all", gpus, send_bytes=matrix))
    off_diagonal = matrix.sum() - np.trace(matrix)
    assert net.bytes_sent.sum() == pytest.approx(off_diagonal) == net.bytes_received.sum()
    assert net.active_flows == 0


def test_degraded_links_slow_their_flows() -> None:
    topo = load_topology(node_spec())
    spec = VarianceSpec(noise_sigma=0, failslow_rate=0, degraded_link_fraction=1.0,
                        degraded_link_factor=2.0)
    slow = VarianceModel.build(spec, topo.num_gpus, np.random.default_rng(0))
    fast, _ = run(topo, lambda net: net.transfer(0, 1, 100 * MB))
    t, _ = run(topo, lambda net: net.transfer(0, 1, 100 * MB), slow)
    assert t == pytest.approx(2 * fast, rel=1e-12)


def test_bad_collectives_are_input_errors() -> None:
    topo = load_topology("h200-8x-nvswitch")
    net = Network(simpy.Environment(), topo)
    for kwargs in (
        {"op": "all_shuffle", "gpus": [0, 1]},
        {"op": "all_reduce", "gpus": [0, 1], "algorithm": "tree"},
        {"op": "all_reduce", "gpus": [0, 0]},
        {"op": "send_recv", "gpus": [0, 1, 2]},
        {"op": "all_to_all", "gpus": [0, 1], "send_bytes": np.ones((3, 3))},
        {"op": "all_reduce", "gpus": [0, 99]},
    ):
        with pytest.raises(InputError):
            net.collective(**kwargs)
    with pytest.raises(InputError):
        net.transfer(0, 1, -1.0)


@st.composite
def flow_sets(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    n_links = draw(st.integers(1, 6))
    n_flows = draw(st.integers(1, 8))
    caps = np.array(draw(st.lists(st.integers(1, 20), min_size=n_links, max_size=n_links)))
    edges = [
        (f, link)
        for f in range(n_flows)
        for link in sorted(draw(st.sets(st.integers(0, n_links - 1), min_size=1)))
    ]
    flow, link = (np.array(x) for x in zip(*edges, strict=True))
    return flow, link, n_flows, caps.astype(float)


@settings(max_examples=150, deadline=None)
@given(flow_sets())
def test_max_min_rates_are_feasible_and_every_flow_has_a_bottleneck(
    case: tuple[np.ndarray, np.ndarray, int, np.ndarray],
) -> None:
    """The defining property: each flow crosses a saturated link on which it is the largest."""
    flow, link, n_flows, caps = case
    rate = max_min_rates(flow, link, n_flows, caps)
    load = np.bincount(link, weights=rate[flow], minlength=caps.size)
    assert (rate > 0).all()
    assert (load <= caps * (1 + 1e-9)).all()
    for f in range(n_flows):
        mine = link[flow == f]
        has_bottleneck = False
        for ln in mine:
            on_link = flow[link == ln]
            saturated = load[ln] >= caps[ln] * (1 - 1e-9)
            if saturated and rate[f] >= rate[on_link].max() * (1 - 1e-9):
                has_bottleneck = True
        assert has_bottleneck, f"flow {f} rate {rate[f]} has no bottleneck"


def test_uniform_all_to_all_needs_few_rate_recomputations() -> None:
    topo = load_topology("h200-roce-railopt", {"nodes": 4})
    t, net = run(topo, lambda net: net.collective("all_to_all", list(range(32)), 32 * MB))
    assert net.flows_done == 32 * 31
    assert net.recomputations < 20, "simultaneous starts and ends are coalesced"
    # Inter-node part: each GPU sends 24 peers' shares through its 50 GB/s NIC.
    assert t >= 24 * MB / 50e9
