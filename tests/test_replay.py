"""Replayed all-to-alls (sim/network/flow/replay.py) give what solving every coflow gives."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import simpy

from libra_des.hardware.fabric.topology import Topology, load_topology
from libra_des.sim.network.flow.flow_model import Network

MB = 1 << 20

#: A gap and a call that starts one operation on a network: each sequence of ops runs one
#: after another, each starting ``gap`` seconds after the previous one ended.
Op = tuple[float, Callable[[Network], simpy.Event]]


def finish_times(
    topo: Topology, sequences: list[list[Op]], replay: bool
) -> tuple[list[float], Network]:
    """Run the sequences side by side; the time each op ends (sequence by sequence)."""
    env = simpy.Environment()
    net = Network(env, topo, replay=replay)
    ends: list[float] = []

    def sequence(ops: list[Op], first: int) -> simpy.events.ProcessGenerator:
        for i, (gap, start) in enumerate(ops):
            yield env.timeout(gap)
            yield start(net)
            ends[first + i] = env.now

    for ops in sequences:
        env.process(sequence(ops, len(ends)))
        ends += [np.nan] * len(ops)
    env.run()
    return ends, net


def a2a(gpus: list[int], matrix: np.ndarray) -> Callable[[Network], simpy.Event]:
    return lambda net: net.collective("all_to_all", gpus, send_bytes=matrix)


def send(src: int, dst: int, nbytes: float) -> Callable[[Network], simpy.Event]:
    return lambda net: net.transfer(src, dst, nbytes)


def all_reduce(gpus: list[int], nbytes: float) -> Callable[[Network], simpy.Event]:
    return lambda net: net.collective("all_reduce", gpus, nbytes)


def mixed_ops(seed: int, count: int, frozen: bool = False) -> list[list[Op]]:
    """Repeated skewed all-to-alls (a few distinct matrices, so that coflows repeat), one
    sequence per GPU group, some groups overlapping; and a sequence of point-to-point
    transfers and ring all-reduces among the same GPUs (so that the set of routes settles,
    as in a training step)."""
    rng = np.random.default_rng(seed)
    groups = [list(range(0, 8)), list(range(8, 16)), list(range(4, 12)), list(range(0, 32, 4))]
    matrices = [rng.pareto(1.5, (8, 8)) * MB for _ in range(3)]
    for matrix in matrices:
        matrix.flags.writeable = not frozen  # read-only: found again by identity
    sequences: list[list[Op]] = [
        [(float(rng.exponential(1e-3)), a2a(gpus, matrices[int(rng.integers(3))]))
         for _ in range(count)]
        for gpus in groups
    ]
    others: list[Op] = []
    for _ in range(count // 4):
        gpus = groups[int(rng.integers(len(groups)))]
        gap = float(rng.exponential(4e-3))
        if rng.random() < 0.6:
            src, dst = (int(x) for x in rng.choice(gpus, 2, replace=False))
            size = float(rng.uniform(1, 16)) * MB
            others.append((gap, send(src, dst, size)))
        else:
            ring = [int(x) for x in rng.choice(gpus, 4, replace=False)]
            others.append((gap, all_reduce(ring, 8 * MB)))
    return [*sequences, others]


@pytest.mark.parametrize(("seed", "frozen"), [(0, False), (1, False), (2, False), (0, True)])
def test_replays_end_when_solving_every_coflow_ends(seed: int, frozen: bool) -> None:
    topo = load_topology("h200-roce-railopt", {"nodes": 4})
    ops = mixed_ops(seed, 40, frozen)
    solved, plain = finish_times(topo, ops, replay=False)
    replayed, net = finish_times(topo, ops, replay=True)
    assert net.replays is not None
    assert bool(net.replays.last) == frozen, "only read-only matrices are found by identity"
    # The test means something only if both paths ran: replays, and replays handed over.
    assert net.replays.replayed > 10
    assert net.replays.handed > 0
    np.testing.assert_allclose(replayed, solved, rtol=1e-9, atol=0)
    np.testing.assert_allclose(net.bytes_received, plain.bytes_received, rtol=1e-12)
    assert net.flows_done == plain.flows_done
    assert not net.replays.live, "every replay ended or was handed over"


def test_a_repeated_all_to_all_alone_takes_the_same_time_as_the_first() -> None:
    topo = load_topology("h200-roce-railopt", {"nodes": 2})
    matrix = np.random.default_rng(3).pareto(1.2, (16, 16)) * MB
    gpus = list(range(16))
    ops: list[Op] = [(0.0, a2a(gpus, matrix)), (1.0, a2a(gpus, matrix)), (1.0, a2a(gpus, matrix))]
    ends, net = finish_times(topo, [ops], replay=True)
    assert net.replays is not None and net.replays.replayed == 2
    first = ends[0]
    assert ends[1] - ends[0] - 1.0 == pytest.approx(first, rel=1e-9)
    assert ends[2] - ends[1] - 1.0 == pytest.approx(first, rel=1e-9)


def test_a_transfer_on_a_replays_links_hands_it_over_mid_way() -> None:
    """A replayed all-to-all saturates its GPUs' links; a transfer joining one of them
    halfway must slow it exactly as it slows the coflow solved in the network."""
    topo = load_topology("h200-roce-railopt", {"nodes": 2})
    matrix = np.full((16, 16), 4.0 * MB)
    gpus = list(range(16))
    first, _ = finish_times(topo, [[(0.0, a2a(gpus, matrix))]], replay=False)
    later = 1.0 + first[0]  # the second all-to-all starts 1 s after the first ended
    ops = [
        [(0.0, a2a(gpus, matrix)), (1.0, a2a(gpus, matrix))],
        [(later + first[0] / 2, send(0, 9, 64.0 * MB))],
    ]
    solved, _ = finish_times(topo, ops, replay=False)
    replayed, net = finish_times(topo, ops, replay=True)
    assert net.replays is not None and net.replays.handed == 1
    assert solved[1] - later > first[0] * (1 + 1e-3), "the transfer slows the second one"
    np.testing.assert_allclose(replayed, solved, rtol=1e-9, atol=0)


def test_replays_never_share_a_saturated_link() -> None:
    """Two replays of the same GPUs at once would both saturate the GPUs' links: the second
    must be solved in the network instead (and the first handed over)."""
    topo = load_topology("h200-roce-railopt", {"nodes": 1})
    matrix = np.full((8, 8), 8.0 * MB)
    gpus = list(range(8))
    first, _ = finish_times(topo, [[(0.0, a2a(gpus, matrix))]], replay=False)
    ops = [[(0.0, a2a(gpus, matrix)), (1.0, a2a(gpus, matrix))],
           [(1.0 + first[0] * 1.5, a2a(gpus, matrix))]]
    solved, _ = finish_times(topo, ops, replay=False)
    replayed, net = finish_times(topo, ops, replay=True)
    assert net.replays is not None and net.replays.replayed == 1 and net.replays.handed == 1
    np.testing.assert_allclose(replayed, solved, rtol=1e-9, atol=0)


def test_a_matrix_changed_in_place_is_not_found_by_identity() -> None:
    """A writable matrix passed again after the caller changed it must not take the profile
    of its old content."""
    topo = load_topology("h200-roce-railopt", {"nodes": 1})
    gpus = list(range(8))

    def run(matrix: np.ndarray, replay: bool) -> list[float]:
        def doubled(net: Network) -> simpy.Event:
            matrix[:] *= 2.0
            return net.collective("all_to_all", gpus, send_bytes=matrix)

        ops: list[Op] = [(0.0, a2a(gpus, matrix)), *[(1.0, a2a(gpus, matrix))] * 2,
                         (1.0, doubled)]
        return finish_times(topo, [ops], replay)[0]

    base = np.random.default_rng(4).pareto(1.2, (8, 8)) * MB
    np.testing.assert_allclose(run(base.copy(), True), run(base.copy(), False), rtol=1e-9)


def test_a_read_only_matrix_is_remembered_once_per_group() -> None:
    """Found again (after a re-validation) while first in its group's list, a matrix must
    not take the other remembered one's place."""
    net = Network(simpy.Environment(), load_topology("h200-roce-railopt", {"nodes": 1}),
                  replay=True)
    book = net.replays
    assert book is not None
    ranks, first, second = (0, 1), np.ones((2, 2)), np.zeros((2, 2))
    for matrix in (first, second, second):
        book.remember(ranks, matrix, None)  # type: ignore[arg-type]  # no profile needed
    assert [id(seen) for seen, _ in book.last[ranks]] == [id(second), id(first)]
