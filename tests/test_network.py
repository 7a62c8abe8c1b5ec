"""Flow-level network: closed forms, max-min fairness, conservation, collectives."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pytest
import simpy
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from reference.solver import TIE_TOLERANCE, bottleneck_links, max_min_rates, refill

from libra_des.config import VarianceSpec
from libra_des.errors import InputError
from libra_des.hardware.fabric.topology import Topology, load_topology
from libra_des.hardware.variance.model import VarianceModel
from libra_des.sim.network.flow.flow_model import Network
from libra_des.sim.network.model import send_together

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


def test_transfers_together_end_with_the_last_of_the_same_flows_sent_one_by_one() -> None:
    """One coflow for a group's messages: it ends when the slowest of the same flows, sent
    as separate transfers, would, with the same bytes sent and received; a pair that
    crosses no link (a GPU to itself) or a message of no bytes still arrives. The
    model-agnostic ``send_together`` falls back to one transfer each."""
    topo = load_topology(node_spec("2us"))
    size = 100 * MB
    pairs = [(0, 1), (0, 2), (1, 5), (3, 3)]  # NVLink shared from GPU 0, a NIC, a self-send
    apart, net_a = run(topo, lambda net: [net.transfer(s, d, size) for s, d in pairs])
    together, net_t = run(topo, lambda net: net.transfers(pairs, size))
    assert together == pytest.approx(apart, rel=1e-12) and together > 0
    for name in ("bytes_sent", "bytes_received"):
        assert np.array_equal(getattr(net_a, name), getattr(net_t, name))
    assert net_t.flows_done == net_a.flows_done == len(pairs)
    empty, net_e = run(topo, lambda net: net.transfers([(0, 1), (2, 6)], 0.0))
    assert empty == pytest.approx(topo.latency(topo.route(2, 6)), rel=1e-12)
    assert net_e.flows_done == 2
    only_self, _ = run(topo, lambda net: net.transfers([(2, 2)], size))
    assert only_self == 0.0
    nothing, _ = run(topo, lambda net: net.transfers([], size))
    assert nothing == 0.0
    plain = AnalyticLike(simpy.Environment())
    send_together(plain, [(0, 1), (2, 3)], size)
    assert plain.sent == [(0, 1), (2, 3)]


class AnalyticLike:
    """A network model with ``transfer`` only (no ``transfers``): records each message."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.sent: list[tuple[int, int]] = []

    def transfer(self, src: int, dst: int, nbytes: float) -> simpy.Event:
        self.sent.append((src, dst))
        return self.env.timeout(0.0)


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
    topo = load_topology("h200-roce-railopt", {"nodes": 4})
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


# ---------------------------------------------------------------- incremental max-min solver
def exact_rates(flow: np.ndarray, link: np.ndarray, n_flows: int, caps: np.ndarray) -> list:
    """Textbook progressive filling in exact rationals: one saturation level per round."""
    routes = [set(link[flow == f].tolist()) for f in range(n_flows)]
    left = [Fraction(int(c)) for c in caps]
    rate: list[Fraction] = [Fraction(0)] * n_flows
    active, level = set(range(n_flows)), Fraction(0)
    while active:
        count = [sum(ln in routes[f] for f in active) for ln in range(len(left))]
        step = min(left[ln] / count[ln] for ln in range(len(left)) if count[ln])
        level += step
        left = [left[ln] - step * count[ln] for ln in range(len(left))]
        frozen = {f for f in active if any(left[ln] == 0 for ln in routes[f])}
        for f in frozen:
            rate[f] = level
        active -= frozen
    return rate


def solve_all(
    flow: np.ndarray, link: np.ndarray, n_flows: int, caps: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Rates and bottlenecks by refill from nothing known (as when all flows arrive)."""
    rate, bneck = np.zeros(n_flows), np.full(n_flows, -1)
    refill(flow, link, caps, rate, bneck, np.ones(n_flows, dtype=bool))
    return rate, bneck


def assert_exact(rate: np.ndarray, exact: list) -> None:
    assert np.allclose(rate, np.array(exact, dtype=float), rtol=1e-9, atol=0)


@st.composite
def flow_sets(
    draw: st.DrawFn, most_links: int = 6, most_flows: int = 8
) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    n_links = draw(st.integers(1, most_links))
    n_flows = draw(st.integers(1, most_flows))
    caps = np.array(draw(st.lists(st.integers(1, 20), min_size=n_links, max_size=n_links)))
    route = st.sets(st.integers(0, n_links - 1), min_size=1, max_size=4)
    edges = [(f, link) for f in range(n_flows) for link in sorted(draw(route))]
    flow, link = (np.array(x) for x in zip(*edges, strict=True))
    return flow, link, n_flows, caps.astype(float)


@settings(max_examples=150, deadline=None)
@given(flow_sets())
def test_max_min_rates_are_exact_feasible_and_every_flow_has_a_bottleneck(
    case: tuple[np.ndarray, np.ndarray, int, np.ndarray],
) -> None:
    """The defining property: each flow crosses a saturated link on which it is the largest.
    Progressive filling and the guided solve from scratch both equal the exact rates."""
    flow, link, n_flows, caps = case
    rate = max_min_rates(flow, link, n_flows, caps)
    exact = exact_rates(flow, link, n_flows, caps)
    assert_exact(rate, exact)
    guided, bneck = solve_all(flow, link, n_flows, caps)
    assert_exact(guided, exact)
    assert all(b in link[flow == f] for f, b in enumerate(bneck)), "a bottleneck is on the route"
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


@settings(max_examples=100, deadline=None)
@given(flow_sets(12, 40), st.data())
def test_rates_after_departures_and_arrivals_equal_exact_progressive_filling(
    case: tuple[np.ndarray, np.ndarray, int, np.ndarray], data: st.DataObject
) -> None:
    """Recompute only the flows at least as fast as the slowest leaver, guided by the old
    bottlenecks; then add flows back and recompute all. Both must match from-scratch."""
    flow, link, n_flows, caps = case
    rate, bneck = solve_all(flow, link, n_flows, caps)
    gone = np.array(data.draw(st.lists(st.booleans(), min_size=n_flows, max_size=n_flows)))
    assume(gone.any() and not gone.all())
    keep = ~gone
    new_id = np.cumsum(keep) - 1
    rows = keep[flow]
    sub_flow, sub_link, n_left = new_id[flow[rows]], link[rows], int(keep.sum())
    floor = rate[gone].min()
    rate_left, bneck_left = rate[keep].copy(), bneck[keep].copy()
    redo = rate_left >= floor * (1 - TIE_TOLERANCE)
    refill(sub_flow, sub_link, caps, rate_left, bneck_left, redo)
    assert_exact(rate_left, exact_rates(sub_flow, sub_link, n_left, caps))
    # Arrivals: the leavers come back, as new flows after the ones that stayed.
    order = np.concatenate([np.flatnonzero(keep), np.flatnonzero(gone)])
    back = np.argsort(order)
    full_flow = back[flow]
    sort = np.argsort(full_flow, kind="stable")
    full_flow, full_link = full_flow[sort], link[sort]
    rate_all = np.concatenate([rate_left, np.zeros(int(gone.sum()))])
    bneck_all = np.concatenate([bneck_left, np.full(int(gone.sum()), -1)])
    refill(full_flow, full_link, caps, rate_all, bneck_all, np.ones(n_flows, dtype=bool))
    assert_exact(rate_all, exact_rates(full_flow, full_link, n_flows, caps))


def test_bottlenecks_are_saturated_links_where_no_flow_is_faster() -> None:
    # Link 0 (cap 2) carries flows 0 and 1; link 1 (cap 10) carries flows 1 and 2.
    flow, link, caps = np.array([0, 1, 1, 2]), np.array([0, 0, 1, 1]), np.array([2.0, 10.0])
    rate = max_min_rates(flow, link, 3, caps)
    assert rate.tolist() == [1.0, 1.0, 9.0]
    assert bottleneck_links(flow, link, rate, caps).tolist() == [0, 0, 1]


# ---------------------------------------------------------------- whole runs vs a reference
def reference_finish_times(
    topo: Topology, starts: list[tuple[float, int, int, float]]
) -> np.ndarray:
    """A plain fluid simulation: full routes, every rate from scratch at every event."""
    net = Network(simpy.Environment(), topo)
    paths = [net.path(src, dst) for _, src, dst, _ in starts]
    begin = np.array([t + latency for (t, *_), (_, latency) in zip(starts, paths, strict=True)])
    left = np.array([size for *_, size in starts], dtype=float)
    end = np.full(left.size, np.nan)
    net.links.refresh()
    caps, now = net.links.capacity, 0.0
    while np.isnan(end).any():
        live = np.flatnonzero((begin <= now) & np.isnan(end))
        flow = np.repeat(np.arange(live.size), [paths[i][0].size for i in live])
        link = np.concatenate([paths[i][0] for i in live]) if live.size else flow
        rate = max_min_rates(flow, link, live.size, caps)
        until = left[live] / rate if live.size else np.zeros(0)
        waiting = begin[begin > now]
        step = min(until.min(initial=np.inf), waiting.min(initial=np.inf) - now)
        left[live] -= rate * step
        now += step
        end[live[left[live] <= 1e-9 * np.array([starts[i][3] for i in live])]] = now
    return end


def network_finish_times(
    topo: Topology, starts: list[tuple[float, int, int, float]]
) -> tuple[np.ndarray, Network]:
    env = simpy.Environment()
    net = Network(env, topo)
    end = np.full(len(starts), np.nan)

    def launch(i: int, t: float, src: int, dst: int, size: float) -> Any:
        yield env.timeout(t)
        yield net.transfer(src, dst, size)
        end[i] = env.now

    for i, start in enumerate(starts):
        env.process(launch(i, *start))
    env.run()
    return end, net


def test_skewed_all_to_all_matches_a_plain_fluid_simulation() -> None:
    """Every flow's finish time, with implied links dropped and rates recomputed only above
    the slowest leaver (guided), equals recomputing everything on full routes each time."""
    topo = load_topology("h200-roce-railopt", {"nodes": 2})
    rng = np.random.default_rng(7)
    sizes = rng.lognormal(0.0, 1.0, size=(16, 16)) * MB
    starts = [(0.0, i, j, sizes[i, j]) for i in range(16) for j in range(16) if i != j]
    got, net = network_finish_times(topo, starts)
    assert np.allclose(got, reference_finish_times(topo, starts), rtol=1e-9, atol=0)
    assert net.recomputations > 200, "every finish is its own instant"
    assert net.fallbacks < 0.1 * net.recomputations, "the guided solve settles most updates"


def test_a_route_that_undoes_an_implied_link_restores_its_constraint() -> None:
    # pcie-8x: GPU 0's PCIe port (32 GB/s) first carries only traffic that leaves the node
    # through the 25 GB/s NIC (implied), then also traffic to GPU 1 on the same switch.
    topo = load_topology("pcie-8x", {"nodes": 2})
    starts = [(0.0, 0, 8, 64 * MB), (0.0, 2, 9, 64 * MB), (2e-4, 0, 1, 64 * MB)]
    got, net = network_finish_times(topo, starts)
    port = net.links.index[("n0/gpu0", "n0/pcie0")]
    assert net.links.binding[port]
    assert np.allclose(got, reference_finish_times(topo, starts), rtol=1e-9, atol=0)
    alone = Network(simpy.Environment(), topo)
    alone.path(0, 8)
    alone.links.refresh()
    assert not alone.links.binding[port], "implied by the NIC while it carries only NIC traffic"


def test_short_flows_late_in_a_run_finish_without_stalling_the_clock() -> None:
    """Long after t=0 a flow's last bytes can need less time than the clock can represent;
    it must finish then instead of re-arming a timer that cannot advance time."""
    topo = load_topology(node_spec())
    starts = [(1000.0 + k * 1e-6, 0, 1 + k % 3, 1e5 * (1 + k)) for k in range(40)]
    got, net = network_finish_times(topo, starts)
    assert np.allclose(got, reference_finish_times(topo, starts), rtol=1e-12, atol=0)
    assert net.recomputations <= 2 * len(starts)


class CountingEnvironment(simpy.Environment):
    """Counts the SimPy events it processes."""

    events = 0

    def step(self) -> None:
        self.events += 1
        super().step()


def test_all_to_all_coflow_and_transfers_match_a_plain_fluid_simulation() -> None:
    """A skewed all-to-all(v) runs as one coflow (no event per flow; ends before the next
    SimPy event are chained inside the engine) beside single transfers that start while it
    runs and unrelated timeouts that cut the chains: its end and every transfer's end equal
    the plain fluid simulation of all the flows."""
    topo = load_topology("h200-roce-railopt", {"nodes": 4})
    rng = np.random.default_rng(3)
    n = 16
    matrix = rng.lognormal(0.0, 1.0, size=(n, n)) * MB
    matrix[rng.random((n, n)) < 0.2] = 0.0  # some pairs send nothing
    singles = [(float(t), int(s), int(d), float(b)) for t, s, d, b in zip(
        rng.uniform(0, 4e-4, 12), rng.integers(0, n, 12), rng.integers(n, 2 * n, 12),
        rng.uniform(0.5, 4, 12) * MB, strict=True)]
    env = CountingEnvironment()
    net = Network(env, topo)
    ends: dict[str, float] = {}

    def collective() -> Any:
        yield net.collective("all_to_all", list(range(n)), send_bytes=matrix)
        ends["a2a"] = env.now

    def single(i: int, t: float, src: int, dst: int, size: float) -> Any:
        yield env.timeout(t)
        yield net.transfer(src, dst, size)
        ends[f"t{i}"] = env.now

    def ticks() -> Any:
        for gap in rng.uniform(0, 1e-4, 20):
            yield env.timeout(float(gap))

    env.process(collective())
    env.process(ticks())
    for i, start in enumerate(singles):
        env.process(single(i, *start))
    env.run()
    pairs = [(0.0, i, j, float(matrix[i, j])) for i in range(n) for j in range(n)
             if i != j and matrix[i, j] > 0]
    want = reference_finish_times(topo, pairs + singles)
    assert ends["a2a"] == pytest.approx(want[: len(pairs)].max(), rel=1e-9, abs=0)
    got = np.array([ends[f"t{i}"] for i in range(len(singles))])
    assert np.allclose(got, want[len(pairs) :], rtol=1e-9, atol=0)
    assert net.flows_done == len(pairs) + len(singles)
    assert net.bytes_received.sum() == pytest.approx(matrix.sum() - np.trace(matrix)
                                                    + sum(s[3] for s in singles))
    assert net.recomputations > 100, "flows end at their own instants"
    assert env.events < net.recomputations, "ends between SimPy events need no event"


def test_flows_within_the_done_tolerance_end_in_the_same_chained_update() -> None:
    """Inside an all-to-all's chained ends, a flow with fewer than DONE_TOLERANCE of its
    bytes left when another ends is retired with it (one rate update, not two), as a
    drain of every flow would find it; a flow a little further off ends on its own."""
    topo = load_topology(node_spec())
    n = 3

    def updates(extra: float) -> tuple[float, int]:
        matrix = np.zeros((n, n))
        matrix[0, 1], matrix[0, 2] = 64 * MB, 64 * MB * (1 + extra)  # one NIC's two flows
        matrix[1, 2] = 8 * MB  # ends first: the two above end in chained updates
        env = simpy.Environment()
        net = Network(env, load_topology(node_spec()), replay=False)
        env.run(net.collective("all_to_all", [0, 4, 5], send_bytes=matrix))
        return env.now, net.recomputations

    (near, near_updates), (far, far_updates) = updates(1e-10), updates(1e-7)
    assert topo.num_gpus == 8
    assert far_updates == near_updates + 1
    assert near == pytest.approx(far, rel=1e-6)


def test_all_to_all_bytes_are_checked_whether_or_not_replays_run() -> None:
    """A matrix with a negative, NaN or inf entry is refused, before and after an equal-shaped
    valid one has been profiled for replays (a replay hit skips no check it needs)."""
    topo = load_topology("h200-8x-nvswitch")
    for replay in (True, False):
        net = Network(simpy.Environment(), topo, replay=replay)
        gpus = [0, 1, 2]
        good = np.full((3, 3), 1e6)
        net.collective("all_to_all", gpus, send_bytes=good)
        net.env.run()
        for bad in (-1.0, np.nan, np.inf):
            matrix = good.copy()
            matrix[0, 1] = bad
            with pytest.raises(InputError, match="send_bytes"):
                net.collective("all_to_all", gpus, send_bytes=matrix)
        net.collective("all_to_all", gpus, send_bytes=good)  # found: replayed
        net.env.run()
        for nbytes in (-1.0, np.nan, np.inf):  # a uniform exchange names its own field
            with pytest.raises(InputError, match="nbytes"):
                net.collective("all_to_all", gpus, nbytes)
