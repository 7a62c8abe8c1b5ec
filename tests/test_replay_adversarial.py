"""Adversarial checks of replayed all-to-alls (sim/network/flow/replay.py): cases built to catch a
replay that drifts from solving every coflow in the network (``Network(replay=False)``).

Every case runs twice, with and without replays, and compares each op's finish time (rtol
1e-9, the issue's bound), the bytes each GPU sent and received and the flows done; each also
checks, through a spy on the hand-over methods, that the path it aims at was really taken.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partialmethod
from typing import Any
from unittest.mock import patch

import numpy as np
import pytest
import simpy

from libra_des.errors import InputError
from libra_des.hardware.fabric.topology import Topology, load_topology, read_spec
from libra_des.hardware.variance.episodes import BernoulliSlowdown
from libra_des.hardware.variance.model import VarianceModel
from libra_des.sim.network.flow.flow_model import Network
from libra_des.sim.network.flow.replay import Handover, Replay
from tests.test_replay import MB, a2a, all_reduce, send

#: One op: its absolute start time, zero-time hops before it starts (to order ops that start
#: at one instant after the network's own events there) and the call that starts it.
Op = tuple[float, int, Callable[[Network], simpy.Event]]


@dataclass
class Spy:
    """What the replaying network did: hand-overs ahead of the clock, several in one update,
    replays found ending at the instant they were to be handed over, hand-overs with
    batches still waiting for their latency, and new routes that rebound live replays (and
    ones that left some live replay as it was)."""

    counts: Counter[str] = field(default_factory=Counter)

    def watch(self, net: Network) -> None:
        book = net.replays
        assert book is not None
        network_hand_over, book_hand_over, rebind = net._hand_over, book.hand_over, book.rebind

        def hand_over_all(replays: list[Replay], at: float) -> list[Any]:
            joined = network_hand_over(replays, at)
            self.counts["ahead"] += at > net.env.now and bool(joined)
            self.counts["several"] += len(joined) >= 2
            return joined

        def hand_over_one(replay: Replay, now: float) -> Handover | None:
            hand = book_hand_over(replay, now)
            self.counts["ends_now" if hand is None else "handed"] += 1
            self.counts["pending"] += hand is not None and bool(hand.pending)
            return hand

        def rebind_some(paths: np.ndarray) -> list[Replay]:
            stale = rebind(paths)
            self.counts["relinked"] += bool(stale)
            self.counts["kept"] += len(book.live) > len(stale)
            return stale

        net._hand_over = hand_over_all  # type: ignore[method-assign]
        book.hand_over = hand_over_one  # type: ignore[method-assign]
        book.rebind = rebind_some  # type: ignore[method-assign]


def run_ops(
    topo: Topology, ops: list[Op], replay: bool, variance: VarianceModel | None = None,
    spy: Spy | None = None,
) -> tuple[np.ndarray, Network]:
    """Each op in its own process from its start time: the time each ends, and the network."""
    env = simpy.Environment()
    net = Network(env, topo, variance, replay=replay)
    if spy is not None:
        spy.watch(net)
    ends = np.full(len(ops), np.nan)

    def one(i: int, start: float, hops: int, call: Callable[[Network], simpy.Event]) -> Any:
        yield env.timeout(start)
        for _ in range(hops):
            yield env.timeout(0)
        yield call(net)
        ends[i] = env.now

    for i, op in enumerate(ops):
        env.process(one(i, *op))
    env.run()
    return ends, net


def compare(
    topo: Topology, ops: list[Op], variance: VarianceModel | None = None
) -> tuple[Network, Spy]:
    """Run ``ops`` solving every coflow and replaying: assert they agree."""
    solved, plain = run_ops(topo, ops, replay=False, variance=variance)
    spy = Spy()
    replayed, net = run_ops(topo, ops, replay=True, variance=variance, spy=spy)
    assert not np.isnan(solved).any()
    np.testing.assert_allclose(replayed, solved, rtol=1e-9, atol=0)
    np.testing.assert_allclose(net.bytes_sent, plain.bytes_sent, rtol=1e-12, atol=0)
    np.testing.assert_allclose(net.bytes_received, plain.bytes_received, rtol=1e-12, atol=0)
    assert net.flows_done == plain.flows_done
    assert net.replays is not None and not net.replays.live
    assert not net.state.reserved.any(), "no live replay, no reservation (not a leftover)"
    return net, spy


def without_latency(
    name: str, nodes: int, level: int | None = None, latency: str = "0us"
) -> Topology:
    """A shipped topology with every link latency 0 (so that arrivals, ends and starts meet
    at one instant), or with ``latency`` on switch level ``level`` only."""

    def zero(spec: Any) -> Any:
        if isinstance(spec, dict):
            return {k: "0us" if k == "latency" else zero(v) for k, v in spec.items()}
        return [zero(v) for v in spec] if isinstance(spec, list) else spec

    spec = read_spec(name)
    if level is None:
        spec = zero(spec)
    else:
        spec["levels"][level]["latency"] = latency
    return load_topology(spec, {"nodes": nodes})


# ---------------------------------------------------------------------- random mixes
TOPOLOGIES = [("h200-roce-railopt", 2), ("h200-roce-railopt", 4), ("h100-ib-3tier", 4),
              ("a100-dgx-ib-hdr", 2), ("pcie-8x", 2), ("h200-roce-railopt-2to1", 4),
              ("h200-8x-nvswitch", 2), ("h100-ib-ndr", 2)]


def random_mix(seed: int) -> tuple[Topology, VarianceModel | None, list[Op]]:
    """Repeated all-to-alls (skewed, uniform, with zero entries, all zero; groups of 2 to 8
    GPUs, overlapping), transfers (to the same GPU, of zero bytes, on new routes) and ring
    all-reduces, on a shipped topology, half the time without latencies, half the time on
    degraded links, with start times on a grid half the time (so that events meet)."""
    rng = np.random.default_rng(seed)
    name, nodes = TOPOLOGIES[seed % len(TOPOLOGIES)]
    topo = without_latency(name, nodes) if rng.random() < 0.5 else load_topology(
        name, {"nodes": nodes})
    n = topo.num_gpus
    grid = rng.random() < 0.5
    variance = None
    if rng.random() < 0.5:
        variance = VarianceModel(n, links=BernoulliSlowdown(0.3, float(rng.uniform(1.5, 4))),
                                 link_seed=int(rng.integers(1 << 30)))

    def gap() -> float:
        if grid:
            return float(rng.integers(0, 4)) * 1e-4
        return float(rng.choice([0.0, rng.exponential(1e-4), rng.exponential(1e-3)]))

    def matrix(k: int) -> np.ndarray:
        m = rng.pareto(1.3, (k, k)) * MB * float(rng.choice([0.01, 1, 8]))
        m[rng.random((k, k)) < 0.3] = 0.0
        if rng.random() < 0.4:
            m = np.full((k, k), float(rng.choice([1, 4, 16])) * MB)
        return m * (rng.random() > 0.1)

    ops: list[Op] = []
    groups = [[int(x) for x in rng.choice(n, int(rng.choice([2, 3, 4, 8])), replace=False)]
              for _ in range(int(rng.integers(2, 6)))]
    for gpus in groups:
        matrices = [matrix(len(gpus)) for _ in range(int(rng.integers(1, 3)))]
        t = 0.0
        for _ in range(int(rng.integers(5, 20))):
            t += gap() + 2e-4
            ops.append((t, 0, a2a(gpus, matrices[int(rng.integers(len(matrices)))])))
    for _ in range(int(rng.integers(5, 30))):
        t = float(rng.uniform(0, ops[-1][0]))
        t = round(t, 4) if grid else t
        if rng.random() < 0.6:
            src, dst = (int(x) for x in rng.choice(n, 2))
            ops.append((t, 0, send(src, dst, float(rng.choice([0, rng.uniform(0.01, 16)])) * MB)))
        else:
            ring = [int(x) for x in rng.choice(n, int(rng.integers(2, 5)), replace=False)]
            ops.append((t, 0, all_reduce(ring, float(rng.uniform(0.5, 16)) * MB)))
    return topo, variance, ops


#: Seeds whose mixes, together, take every path the spy tells apart (checked below; 17 and
#: 146 are the first to hand over several replays at once and to hand over ahead of the
#: clock, 22 the first to rebind one live replay and keep another; 2,500 seeds of this
#: generator were run in development and all agreed).
MIX_SEEDS = [*range(12), 17, 22, 146]


def test_random_mixes_match_solving_every_coflow() -> None:
    seen: Counter[str] = Counter()
    for seed in MIX_SEEDS:
        topo, variance, ops = random_mix(seed)
        net, spy = compare(topo, ops, variance)
        assert net.replays is not None
        seen.update(spy.counts)
        seen["replayed"] += net.replays.replayed
        seen["degraded"] += variance is not None and net.replays.replayed > 0
    for path in ("replayed", "handed", "several", "relinked", "kept", "pending", "ahead",
                 "degraded"):
        assert seen[path] > 0, f"no mix took the path {path!r}: {dict(seen)}"


# ---------------------------------------------------------------------- built cases
def test_hand_over_at_a_chained_end_ahead_of_the_clock() -> None:
    """Replay A (GPUs 0 and 16 into 8) holds half of GPU 0's NIC. A transfer 0 -> 24 shares
    GPU 24's NIC with coflow H (solved in the network: a transfer 56 -> 24 there keeps H from
    replaying) and speeds up as H's flows end one by one; the end that leaves GPU 0's NIC
    short of headroom is one the kernel chains past the clock, so A joins the network
    there (``at > env.now``), with its flow from GPU 1 still crossing a 6 ms spine."""
    topo = without_latency("h200-roce-railopt", 8, level=2, latency="6ms")
    a = np.zeros((4, 4))
    a[0, 1] = a[2, 1] = 256 * MB
    a[3, 1] = MB
    h = np.zeros((4, 4))
    h[1:, 0] = np.array([8, 16, 24]) * MB
    ga, gh = [0, 8, 16, 1], [24, 32, 40, 48]
    ops: list[Op] = [
        (0.0, 0, a2a(ga, a)), (0.0, 0, a2a(gh, 2 * h)),  # routes settle, A is profiled
        (0.0, 0, send(56, 24, MB)), (0.0, 0, send(0, 24, MB)),
        (1.0, 0, a2a(ga, a)), (1.001, 0, send(56, 24, 256 * MB)),
        (1.002, 0, a2a(gh, h)), (1.002, 0, send(0, 24, 64 * MB)),
    ]
    _, spy = compare(topo, ops)
    assert spy.counts["ahead"] == 1 and spy.counts["handed"] == 1 and spy.counts["pending"] == 1


def test_a_replay_met_at_its_last_instant_is_left_to_end() -> None:
    """Without latencies, a transfer as fast as replay A starts with it and ends at A's end;
    a zero-byte transfer on a new route into GPU 1 in between makes that update rebind A's
    second NVLink hop and hand A over: A, ending at that instant, must end as a replay."""
    topo = without_latency("h200-roce-railopt", 2)
    one = np.array([[0.0, 64 * MB], [0.0, 0.0]])
    ops: list[Op] = [
        (0.0, 0, a2a([0, 1], one)), (0.0, 0, send(2, 3, MB)),
        # The transfer's update at 1.0 comes before A starts (one hop later), so the
        # network's timer for its end is older than A's.
        (1.0, 0, send(2, 3, 64 * MB)), (1.0, 1, a2a([0, 1], one)),
        (1.0001, 0, send(3, 1, 0.0)),
    ]
    net, spy = compare(topo, ops)
    assert net.replays is not None and net.replays.replayed == 1
    assert spy.counts["ends_now"] == 1 and spy.counts["handed"] == 0


def test_a_replay_short_of_headroom_at_its_last_instant_is_left_to_end() -> None:
    """Without latencies, replay A (GPUs 0 and 1 into 2) holds half of GPU 0's NVLink; a
    transfer 0 -> 3 shares GPU 3's link with two others, one of which ends exactly when A
    does. The transfer then speeds up past A's headroom at A's last instant: the update
    finds A has left the link at that instant (its last flow there ends then), so nothing
    is short of headroom, and A ends as a replay without a hand-over being tried."""
    topo = without_latency("h200-roce-railopt", 1)
    a = np.zeros((3, 3))
    a[0, 2] = a[1, 2] = 3.0 * MB
    ops: list[Op] = [(0.0, 0, a2a([0, 1, 2], a))]
    ops += [(0.0, 0, send(src, 3, MB)) for src in (0, 4, 5)]
    ops += [(1.0, 0, send(4, 3, 2.0 * MB)), (1.0, 0, send(5, 3, 64.0 * MB)),
            (1.0, 0, send(0, 3, 64.0 * MB)), (1.0, 1, a2a([0, 1, 2], a))]
    net, spy = compare(topo, ops)
    assert net.replays is not None and net.replays.replayed == 1
    assert spy.counts["ends_now"] == 0 and spy.counts["handed"] == 0


def test_a_replay_waiting_for_its_latency_joins_with_its_batches() -> None:
    """An all-to-all over two nodes starts its NVLink flows about a microsecond before its
    RoCE flows. A transfer on GPU 0's NVLink arriving in between hands it over while the
    RoCE batch is still in flight: that batch must join the network at its own time."""
    topo = load_topology("h200-roce-railopt", {"nodes": 2})
    matrix = np.full((16, 16), 4.0 * MB)
    gpus = list(range(16))
    alone, _ = run_ops(topo, [(0.0, 0, a2a(gpus, matrix))], replay=False)
    start = 1.0 + alone[0]
    ops: list[Op] = [(0.0, 0, a2a(gpus, matrix)), (start, 0, a2a(gpus, matrix)),
                     (start + 0.6e-6, 0, send(0, 1, 16.0 * MB))]
    _, spy = compare(topo, ops)
    assert spy.counts["pending"] == 1 and spy.counts["handed"] == 1


@pytest.mark.parametrize("src", [3, 5])
def test_replays_started_together_handed_over_one_or_both(src: int) -> None:
    """Two groups of four GPUs start the same all-to-all at one instant (two profiles, equal
    makespans). A transfer from GPU 3 to 4 crosses both groups' links and hands both over in
    one update; one from GPU 5 to 4 hands over the second only, which must be taken off the
    live list by identity (compared field by field, the profiles' arrays raised)."""
    topo = load_topology("h200-roce-railopt", {"nodes": 1})
    matrix = np.full((4, 4), 8.0 * MB)
    low, high = [0, 1, 2, 3], [4, 5, 6, 7]
    ops: list[Op] = [(0.0, 0, a2a(low, matrix)), (0.0, 0, a2a(high, matrix)),
                     (0.0, 0, send(src, 4, MB)),
                     (1.0, 0, a2a(low, matrix)), (1.0, 0, a2a(high, matrix)),
                     (1.0 + 2e-5, 0, send(src, 4, 32.0 * MB))]
    net, spy = compare(topo, ops)
    assert net.replays is not None and net.replays.replayed == 2
    both = src in low
    assert spy.counts["handed"] == 1 + both and spy.counts["several"] == both


def test_a_new_route_hands_over_only_the_replays_it_rebinds() -> None:
    """A transfer on routes never seen can change which links bind. GPU 0's flow to GPU 1
    crosses two NVLink hops of one width, and only the first binds; a transfer 2 -> 1 also
    crosses the second, which then binds instead: the live replay over it goes on in the
    network from its solo run's state, and its profile is made again. A transfer 4 -> 5
    changes no link of the replay 8 -> 9, which keeps replaying from its profile."""
    topo = load_topology("h200-roce-railopt", {"nodes": 2})
    one = np.array([[0.0, 64 * MB], [0.0, 0.0]])
    ops: list[Op] = [(0.0, 0, a2a([0, 1], one)), (1.0, 0, a2a([0, 1], one)),
                     (1.0 + 5e-5, 0, send(2, 1, 4.0 * MB)), (2.0, 0, a2a([0, 1], one))]
    net, spy = compare(topo, ops)
    assert spy.counts["relinked"] == 1 and spy.counts["handed"] == 1
    book = net.replays
    # Made again; its one binding link has the same width, so its solo run is shared.
    assert book is not None and (book.solo_runs, book.solo_shared) == (1, 1)
    ops = [(0.0, 0, a2a([8, 9], one)), (1.0, 0, a2a([8, 9], one)),
           (1.0 + 5e-5, 0, send(4, 5, 4.0 * MB)), (2.0, 0, a2a([8, 9], one))]
    net, spy = compare(topo, ops)
    assert spy.counts["kept"] == 1 and spy.counts["relinked"] == 0
    assert spy.counts["handed"] == 0
    book = net.replays
    assert book is not None and (book.replayed, book.solo_runs, book.solo_shared) == (2, 1, 0)


def test_degraded_links_replay_as_they_solve() -> None:
    topo = load_topology("h200-roce-railopt", {"nodes": 2})
    variance = VarianceModel(16, links=BernoulliSlowdown(0.5, 3.0), link_seed=11)
    rng = np.random.default_rng(2)
    matrices = [rng.pareto(1.5, (16, 16)) * MB for _ in range(2)]
    ops: list[Op] = [(0.0, 0, send(0, 9, MB))]
    ops += [(1e-2 * i, 0, a2a(list(range(16)), matrices[i % 2])) for i in range(1, 9)]
    ops += [(1e-2 * i + 5e-5, 0, send(i, 15 - i, 8.0 * MB)) for i in range(1, 9)]
    net, spy = compare(topo, ops, variance)
    assert net.replays is not None and net.replays.replayed >= 4 and spy.counts["handed"] > 0
    assert (net.links.capacity < net.state.cap.max()).any(), "some link used is degraded"


def test_counters_with_zero_bytes_self_sends_and_two_gpu_groups() -> None:
    """Zero entries, an all-zero matrix, a 2-GPU group, transfers to the same GPU and of
    zero bytes: the bytes and flows counted match, replayed or not."""
    topo = load_topology("h200-roce-railopt", {"nodes": 2})
    pair = np.array([[5.0 * MB, 3.0 * MB], [0.0, 0.0]])  # the diagonal is not sent
    sparse = np.diag(np.full(4, MB)) + np.eye(4, k=1) * 2 * MB
    ops: list[Op] = [(0.0, 0, send(0, 9, MB)), (0.0, 0, send(2, 11, MB))]
    for i in range(1, 5):
        ops += [(1e-2 * i, 0, a2a([0, 9], pair)), (1e-2 * i, 0, a2a([2, 3, 10, 11], sparse)),
                (1e-2 * i, 0, a2a([4, 5], np.zeros((2, 2)))),
                (1e-2 * i + 1e-6, 0, send(9, 9, MB)), (1e-2 * i + 1e-6, 0, send(0, 9, 0.0))]
    net, _ = compare(topo, ops)
    assert net.replays is not None and net.replays.replayed >= 6
    assert net.bytes_received.sum() == net.bytes_sent.sum() > 0


def test_same_inputs_same_outputs() -> None:
    topo, variance, ops = random_mix(3)
    first, a = run_ops(topo, ops, replay=True, variance=variance)
    second, b = run_ops(topo, ops, replay=True, variance=variance)
    assert a.replays is not None and b.replays is not None and a.replays.replayed > 0
    assert first.tobytes() == second.tobytes()
    assert a.bytes_received.tobytes() == b.bytes_received.tobytes()
    assert (a.flows_done, a.recomputations, a.replays.handed) == (
        b.flows_done, b.recomputations, b.replays.handed)



@pytest.mark.parametrize("bad", [np.inf, np.nan])
def test_non_finite_bytes_are_refused(bad: float) -> None:
    """An inf entry "arrived" at once and counted inf bytes sent; a NaN one was skipped."""
    net = Network(simpy.Environment(), load_topology("h200-roce-railopt", {"nodes": 1}))
    matrix = np.full((4, 4), float(MB))
    matrix[0, 1] = bad
    with pytest.raises(InputError, match="send_bytes"):
        net.collective("all_to_all", [0, 1, 2, 3], send_bytes=matrix)
    with pytest.raises(InputError, match="nbytes"):
        net.transfer(0, 1, bad)
    assert not net.bytes_sent.any()


def numbers(data: Any, where: str = "") -> dict[str, float]:
    """Every number in a result, by its path."""
    if isinstance(data, dict | list):
        items = data.items() if isinstance(data, dict) else enumerate(data)
        out: dict[str, float] = {}
        for key, value in items:
            out.update(numbers(value, f"{where}.{key}"))
        return out
    return {where: float(data)} if isinstance(data, int | float) else {}


def test_a_detailed_training_step_agrees_with_and_without_replays() -> None:
    """The quickstart at 64 GPUs (DP 2) in detailed fidelity, as benchmarks/detailed.py
    runs it: every number of the result agrees (rtol 1e-9) but the SimPy event count, which
    replays lower, and the wall clock. (Admitting every replay unchecked moves it by 3e-4.)"""
    from libra_des.config import ROOT, load_scenario
    from libra_des.kinds.simulation import simulate

    scenario = load_scenario(ROOT / "scenarios" / "quickstart.yaml", [
        "parallelism.dp=2", "parallelism.gbs=16", "balancer.pool_size=2", "fidelity=detailed"])
    replayed, _ = simulate(scenario)
    with patch.object(Network, "__init__", partialmethod(Network.__init__, replay=False)):
        solved, _ = simulate(scenario)
    got, want = numbers(replayed), numbers(solved)
    assert got.keys() == want.keys()
    assert got.pop(".events") < want.pop(".events"), "replays ran"
    far = {k: (got[k], want[k]) for k in want
           if not np.isclose(got[k], want[k], rtol=1e-9, atol=0)}
    assert not far


def test_a_link_a_replay_has_left_takes_a_transfer_without_a_hand_over() -> None:
    """Replay A sends 1 MB 0 -> 1 and 64 MB 2 -> 3 (one node, no latencies): its first flow
    saturates GPU 0's NVLink port and ends long before A does. A transfer 0 -> 4 that starts
    after that end meets A's reservation of the port (its whole-life peak) but A has left the
    port by then, so nothing is short of headroom: A stays a replay, and every finish time
    agrees with solving every coflow."""
    topo = without_latency("h200-roce-railopt", 1)
    a = np.zeros((4, 4))
    a[0, 1], a[2, 3] = MB, 64 * MB
    group = [0, 1, 2, 3]
    ops: list[Op] = [(0.0, 0, a2a(group, a)), (0.5, 0, send(0, 4, MB)),  # routes settle
                     (1.0, 0, a2a(group, a)), (1.00005, 0, send(0, 4, MB))]
    net, spy = compare(topo, ops)
    assert net.replays is not None and net.replays.replayed == 1
    assert spy.counts["handed"] == 0 and spy.counts["ends_now"] == 0


def test_groups_alike_in_their_own_links_share_one_solo_run() -> None:
    """One matrix on two nodes' GPUs: the second group's frame (its links, paths and flows
    in local numbers) equals the first's, so its profile takes the first's solo run; the
    ops still end as when every coflow is solved. A third group with another matrix runs
    its own."""
    topo = load_topology("h200-roce-railopt", {"nodes": 4})
    rng = np.random.default_rng(8)
    matrix, other = rng.pareto(1.3, (8, 8)) * MB, rng.pareto(1.3, (8, 8)) * MB
    groups = [(list(range(8)), matrix), (list(range(8, 16)), matrix),
              (list(range(16, 24)), other)]
    ops: list[Op] = [(1e-2 * i, 0, a2a(*group)) for i in range(3) for group in groups]
    net, _ = compare(topo, ops)
    book = net.replays
    assert book is not None and book.replayed >= 6
    assert (book.solo_runs, book.solo_shared) == (2, 1)


def test_alike_groups_share_a_solo_run_whatever_order_their_links_were_numbered() -> None:
    """Two groups of the same shape on other nodes, with one matrix: the second group's
    links were numbered in another order (a transfer between its nodes ran first, so its
    network links come before its NVLink ones), yet its frame, numbered by first use along
    the paths, equals the first group's: one solo run serves both, and the ops end as when
    every coflow is solved."""
    topo = load_topology("h200-roce-railopt", {"nodes": 4})
    matrix = np.random.default_rng(5).pareto(1.3, (4, 4)) * MB
    first, second = [0, 1, 8, 9], [16, 17, 24, 25]
    ops: list[Op] = [(0.0, 0, send(24, 16, MB))]
    ops += [(1e-2 * (i + 1), 0, a2a(group, matrix)) for i in range(3) for group in (first, second)]
    net, _ = compare(topo, ops)
    book = net.replays
    assert book is not None and book.replayed >= 4
    assert (book.solo_runs, book.solo_shared) == (1, 1)
