"""Flow-level network for the detailed fidelity mode.

Model (assumptions stated once):
- A transfer is a *flow* on the topology's route between two GPUs. It first waits the route's
  latency (the sum of its links' one-way latencies, paid once), then drains its bytes at a
  rate that links share max-min fairly (progressive filling) with every other active flow.
- Links are full duplex: each direction of an edge has its own capacity. A degraded link (see
  :class:`~libra_des.hardware.variance.model.VarianceModel`) has its capacity divided by its factor.
- Rates change only when a flow starts or ends. Such changes at one instant are coalesced into
  one recomputation, and only one "next completion" timer is live: a newer timer makes older
  ones stale (SimPy cannot cancel a timeout, so a stale one fires and is ignored).
- A transfer to the same GPU, or of zero bytes, moves nothing through the network.
- Point-to-point messages (:meth:`Network.transfer`, send_recv, all-to-all(v)) take the
  topology's point-to-point routes (:meth:`~libra_des.hardware.fabric.topology.Topology.p2p_route`:
  through a PXN proxy where the topology relays); the transfers of ring and direct
  collectives and copy-engine pulls (:meth:`Network.receive`) take its direct routes.

Solving: a link that every route through it shares with a link no wider is dropped from the
problem: it can never bind (:class:`LinkTable`). Active flows live in arrays
(:class:`~libra_des.sim.network.flow.fluid.FluidState`) that compiled kernels advance
(:mod:`libra_des.sim.network.flow.fluid_kernel`: only the flows a change can affect are re-solved,
and flow ends that nothing outside the network can see before the next SimPy event are
processed without a timer). An all-to-all(v) is one *coflow*: its flows run as before, but
only its last end is an event. The numpy solver of :mod:`libra_des.sim.network.solver` is the
reference the tests compare with; its names are re-exported here.

Collectives run as the transfer DAG the chosen algorithm gives in the collective catalogue
(:mod:`libra_des.hardware.collectives.collective_catalogue`; ``nbytes`` follows nccl-tests'
``size``): a
transfer starts once the transfers it waits for have arrived. The algorithm defaults to the
op's usual one (ring, or direct for all_to_all and send_recv); one without a DAG (tree, nvls)
is refused. ``hierarchical`` and ``multilevel`` run the steps the cost model prices
(:mod:`libra_des.hardware.collectives.hierarchy`) as flat rings per level, one after another.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise

import numpy as np
import simpy

from libra_des.errors import InputError
from libra_des.hardware.collectives import deepep
from libra_des.hardware.collectives.collective_catalogue import (
    COMPOSED,
    COMPOSED_OPS,
    DAG_ALGORITHMS,
    DEFAULT_ALGORITHM,
    OPS,
    Dag,
    composed_dag,
    transfer_dag,
)
from libra_des.hardware.collectives.hierarchy import Step, decompose, level_ranks
from libra_des.hardware.fabric.topology import Topology
from libra_des.hardware.variance.model import VarianceModel
from libra_des.sim.network.flow.fluid import FluidState
from libra_des.sim.network.flow.link_table import LinkTable
from libra_des.sim.network.flow.replay import Profile, Replay, ReplayBook
from libra_des.sim.network.flow.routes import RouteNumbers
from libra_des.sim.network.flow.stretch import all_to_all_stretch

#: Flows to start together: path numbers, bytes, receiving GPUs, coflows.
Flows = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


class Network:
    """Max-min fair flow network over a :class:`Topology` (see module docstring)."""

    def __init__(
        self,
        env: simpy.Environment,
        topology: Topology,
        variance: VarianceModel | None = None,
        replay: bool = True,
        p2p_rate: Callable[[int], float] | None = None,
        fan_in_share: Callable[[int, int], float] | None = None,
    ) -> None:
        self.env = env
        #: How the fast model rates an all-to-all's flows (:mod:`.stretch`): NCCL's p2p
        #: rate inside a node, the incast share across nodes (None: the link's, the law's).
        self.p2p_rate, self.fan_in_share = p2p_rate, fan_in_share
        self._port = topology.fabric().intra_bw if p2p_rate is not None else 0.0
        self.topology = topology
        self.variance = variance or VarianceModel.none()
        self.bytes_sent = np.zeros(topology.num_gpus)
        self.bytes_received = np.zeros(topology.num_gpus)
        #: Recomputations that needed a fallback solve: none since the compiled engine
        #: (progressive filling every time); kept for the benchmarks' tables.
        self.fallbacks = 0
        self.links = LinkTable(topology, self.variance)
        self._numbers = RouteNumbers(topology, self.links.number)
        self.state = FluidState(self.bytes_received)
        self._local_done = 0  # transfers that crossed no link (same GPU, or zero bytes)
        # Keyed (src, dst, relay): relay for a point-to-point message's route (PXN).
        self._paths: dict[tuple[int, int, bool], tuple[np.ndarray, float]] = {}
        self._path_ids: dict[tuple[int, int, bool], int] = {}
        self._routes: list[np.ndarray] = []
        self._pairs: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}
        #: Flow stretch per (group, NCCL's fan-in applies).
        self._stretch: dict[tuple[tuple[int, ...], bool], np.ndarray | None] = {}
        self._groups: dict[tuple[int, ...], list[int]] = {}
        self._arrived: list[tuple[Flows, np.ndarray]] = []  # (flows, bytes left)
        #: Repeated all-to-alls replayed from solo runs while nothing interacts with them
        #: (:mod:`~libra_des.sim.network.flow.replay`); None: every coflow is solved here.
        self.replays = ReplayBook(self.state) if replay else None
        self._replay_flows = 0  # flows done inside replays
        self._waiting: dict[int, simpy.Event] = {}  # coflow -> its event
        self._updated_at = 0.0
        self._timer = 0
        self._update_pending = False

    # ------------------------------------------------------------------ transfers
    def transfer(self, src: int, dst: int, nbytes: float) -> simpy.Event:
        """Send ``nbytes`` from GPU ``src`` to GPU ``dst`` (a point-to-point message); the
        event fires on arrival."""
        return self._send(src, dst, nbytes, True)

    def transfers(self, pairs: Sequence[tuple[int, int]], nbytes: float) -> simpy.Event:
        """Send ``nbytes`` from each ``(src, dst)`` of ``pairs`` at once, one message each
        (a stage's hand-off from its group of GPUs); the event fires when the last arrives.
        The messages are one coflow: the same flows as one :meth:`transfer` each, with
        one completion to report."""
        if len(pairs) == 1:
            return self._send(*pairs[0], nbytes, True)
        return self._send_group(pairs, nbytes, True)

    def _send(self, src: int, dst: int, nbytes: float, relay: bool) -> simpy.Event:
        """One message on the point-to-point route (``relay``) or the direct one. Every
        transfer of a DAG collective comes this way, so it stays one route look-up and four
        one-element arrays (through the group path, a ring all-reduce over 64 GPUs took
        1.19-1.84x the time, median 1.43x: ``benchmarks/network.py --cases rail64-ring``)."""
        check_bytes(nbytes)
        links, latency = self.path(src, dst, relay)
        done = self.env.event()
        self.bytes_sent[src] += nbytes
        if links.size == 0 or nbytes == 0:
            self.env.timeout(latency).callbacks.append(self._local(dst, nbytes, done))
            return done
        group = self.state.group(1)
        self._waiting[group] = done
        self._schedule(latency, (np.array([self._path_ids[src, dst, relay]]),
                                 np.array([float(nbytes)]), np.array([dst]), np.array([group])))
        return done

    def _send_group(
        self, pairs: Sequence[tuple[int, int]], nbytes: float, relay: bool
    ) -> simpy.Event:
        """:meth:`transfers` on point-to-point routes (``relay``) or direct ones. A message
        that crosses no link (same GPU, or no bytes) arrives after its route's latency; the
        others are one coflow, joining the network by route latency."""
        check_bytes(nbytes)
        routes = [self.path(src, dst, relay) for src, dst in pairs]  # bad GPUs raise here
        done = self.env.event()
        ids, latency, dsts = [], [], []
        local: list[simpy.Event] = []
        for (src, dst), (links, delay) in zip(pairs, routes, strict=True):
            self.bytes_sent[src] += nbytes
            if links.size == 0 or nbytes == 0:
                arrived = self.env.event()
                self.env.timeout(delay).callbacks.append(self._local(dst, nbytes, arrived))
                local.append(arrived)
                continue
            ids.append(self._path_ids[src, dst, relay])
            latency.append(delay)
            dsts.append(dst)
        if not ids:  # nothing crosses a link (or no pairs): the local arrivals only
            return self.env.all_of(local) if len(local) != 1 else local[0]
        event = self.env.all_of([*local, done]) if local else done
        group = self.state.group(len(ids))
        self._waiting[group] = done
        flows = (np.array(ids), np.full(len(ids), float(nbytes)), np.array(dsts),
                 np.full(len(ids), group))
        for delay, batch in self._by_latency(np.array(latency), np.arange(len(ids)), flows):
            self._schedule(delay, batch)
        return event

    def path(self, src: int, dst: int, relay: bool = False) -> tuple[np.ndarray, float]:
        """Link numbers and total latency of the direct route or (``relay``) the
        point-to-point one (cached; one path number where the two are the same)."""
        key = (src, dst, relay)
        found = self._paths.get(key)
        if found is None:
            found = self._new_path(key)
        return found

    def _new_path(self, key: tuple[int, int, bool]) -> tuple[np.ndarray, float]:
        """:meth:`path` not cached yet: route, link numbers (in route order: numbering
        order breaks ties in :class:`LinkTable`) and latency, summed link by link."""
        src, dst, relay = key
        via = self.topology.proxy(src, dst) if relay else None
        if relay and via is None:
            self._paths[key] = self.path(src, dst)
            self._path_ids[key] = self._path_ids[src, dst, False]
            return self._paths[key]
        # Topology.p2p_route's links, with the proxy already known.
        segments = self._numbers.segments(src, dst, via)
        self.links.add_route(segments)
        numbers = [link for segment in segments for link in segment]
        # Summed link by link, from 0, as ``sum`` over a generator would.
        latency = sum(map(self.links.latency.__getitem__, numbers))
        self._paths[key] = (np.array(numbers, dtype=np.int64), latency)
        self._path_ids[key] = len(self._routes)
        self._routes.append(self._paths[key][0])
        return self._paths[key]

    @property
    def active_flows(self) -> int:
        return self.state.active_flows

    @property
    def flows_done(self) -> int:
        return self._local_done + self.state.flows_done + self._replay_flows

    @property
    def recomputations(self) -> int:
        """Rate recomputations, solo runs of replayed coflows included."""
        solo = self.replays.solo_solves if self.replays is not None else 0
        return self.state.recomputations + solo

    def _all_to_all(self, ranks: list[int], matrix: np.ndarray,
                    fan_in: bool = True) -> simpy.Event:
        """Every off-diagonal pair with bytes to send as one coflow (what
        :func:`direct_pairs` lists, without a Python object per flow); a replay
        (:mod:`.replay`) where the check allows it."""
        n = len(ranks)
        paths, latency = self._pair_paths(ranks)
        done = self.env.event()
        key = tuple(ranks)
        gpus = np.array(ranks)
        book = self.replays if not self.links.stale else None  # stale: binding not settled
        profile = book.find(key, matrix) if book is not None else None
        if profile is None:
            check_values(matrix)  # a matrix found equals one checked before (NaN never does)
        stretch = self._incast(key, fan_in)
        if stretch is not None:  # the receivers get the real bytes, the flows carry more
            np.add.at(self.bytes_received, gpus, (matrix * (1.0 - stretch)).sum(axis=0))
        if profile is not None and self._replay(profile, done):
            return done
        pick = np.flatnonzero(matrix > 0)  # row-major, as listed
        pick = pick[pick % (n + 1) != 0]  # off the diagonal
        sizes = matrix.ravel()[pick]
        if not pick.size:
            return done.succeed()
        moved = sizes if stretch is None else sizes * stretch.ravel()[pick]
        flows = (paths.ravel()[pick], moved, gpus[pick % n], np.full(pick.size, -1))
        batches = self._by_latency(latency, pick, flows)
        senders = gpus[pick // n]
        if book is not None and profile is None:
            profile = book.make(key, matrix, batches, senders, sizes)
            if self._replay(profile, done):
                return done
        np.add.at(self.bytes_sent, senders, sizes)
        group = self.state.group(pick.size)
        self._waiting[group] = done
        for delay, (p, s, d, _) in batches:
            self._schedule(delay, (p, s, d, np.full(p.size, group)))
        return done

    def _incast(self, ranks: tuple[int, ...], fan_in: bool = True) -> np.ndarray | None:
        """:func:`~.stretch.all_to_all_stretch` of the group (cached; ``fan_in``: NCCL's
        incast share applies)."""
        if (ranks, fan_in) not in self._stretch:
            self._stretch[ranks, fan_in] = all_to_all_stretch(
                np.asarray(ranks) // self.topology.gpus_per_node, self._port, self.p2p_rate,
                self.fan_in_share if fan_in else None, fan_in)
        return self._stretch[ranks, fan_in]

    def _schedule(self, delay: float, flows: Flows) -> None:
        """``flows`` join the network after ``delay`` seconds (their route latency)."""
        if delay > 0:
            self.env.timeout(float(delay)).callbacks.append(lambda _e: self._arrive(flows))
        else:
            self._arrive(flows)

    # ------------------------------------------------------------------ replays
    def _replay(self, profile: Profile, done: simpy.Event) -> bool:
        """Start an all-to-all as a replay of ``profile`` if the check of :mod:`.replay`
        allows it."""
        assert self.replays is not None
        replay = self.replays.begin(profile, self.env.now, done, self.bytes_sent)
        if replay is None:
            return False
        self.env.timeout(profile.makespan).callbacks.append(lambda _e: self._replayed(replay))
        return True

    def _replayed(self, replay: Replay) -> None:
        if not replay.live:
            return  # handed over to the network, which reports its end
        assert self.replays is not None
        self.replays.end(replay, self.bytes_received)
        self._replay_flows += replay.profile.flows
        replay.done.succeed()

    def _hand_over(self, replays: list[Replay], at: float) -> list[tuple[Flows, np.ndarray]]:
        """Move ``replays`` into the network at time ``at`` (now or a chained end after
        it): their running flows (returned with the bytes they have left) and, later, their
        flows still in flight to the first link."""
        assert self.replays is not None
        joined = []
        for replay in replays:
            hand = self.replays.hand_over(replay, at)
            if hand is None:
                continue
            flows = hand.flows[0].size + sum(b[0].size for _, b in hand.pending)
            group = self.state.group(flows)
            self._waiting[group] = replay.done
            self.bytes_received += hand.received
            self._replay_flows += hand.finished
            for delay, (p, s, d, _) in hand.pending:
                self._schedule(at + delay - self.env.now, (p, s, d, np.full(p.size, group)))
            p, s, d, _ = hand.flows
            joined.append(((p, s, d, np.full(p.size, group)), hand.left))
        return joined

    def _add(self, arrived: list[tuple[Flows, np.ndarray]]) -> None:
        paths, sizes, dsts, groups = (
            np.concatenate(parts) for parts in zip(*(f for f, _ in arrived), strict=True)
        )
        self.state.add(paths, sizes, dsts, groups, np.concatenate([left for _, left in arrived]))

    @staticmethod
    def _by_latency(
        latency: np.ndarray, pick: np.ndarray, flows: Flows
    ) -> list[tuple[float, Flows]]:
        """``flows`` (pairs ``pick``) split by route latency, ascending; each batch keeps
        the listed order (a stable sort by latency, then one slice per latency)."""
        delays = latency.ravel()[pick]
        if (delays == delays[0]).all():
            return [(float(delays[0]), flows)]
        order = np.argsort(delays, kind="stable")
        delays = delays[order]
        cuts = np.flatnonzero(delays[1:] != delays[:-1]) + 1
        bounds = [0, *cuts.tolist(), delays.size]
        paths, sizes, dsts, groups = (a[order] for a in flows)
        return [
            (float(delays[lo]), (paths[lo:hi], sizes[lo:hi], dsts[lo:hi], groups[lo:hi]))
            for lo, hi in pairwise(bounds)
        ]

    def _pair_paths(self, ranks: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Path numbers and latencies between every pair of ``ranks`` (cached per group)."""
        key = tuple(ranks)
        if key not in self._pairs:
            found, ids = self._paths, self._path_ids
            paths, latency = [], []
            for src in ranks:
                for dst in ranks:
                    if src == dst:
                        paths.append(0)
                        latency.append(0.0)
                        continue
                    pair = (src, dst, True)
                    latency.append((found.get(pair) or self._new_path(pair))[1])
                    paths.append(ids[pair])
            n = len(ranks)
            self._pairs[key] = (
                np.array(paths, dtype=np.int64).reshape(n, n), np.array(latency).reshape(n, n),
            )
        return self._pairs[key]

    # ------------------------------------------------------------------ rate bookkeeping
    def _arrive(self, flows: Flows) -> None:
        self._arrived.append((flows, flows[1]))
        if not self._update_pending:
            # Coalesce every change at this instant into one recomputation.
            self._update_pending = True
            self.env.timeout(0).callbacks.append(self._update)

    def _on_timer(self, timer: int) -> None:
        if timer == self._timer:
            self._update(None)

    def _update(self, _event: simpy.Event | None) -> None:
        """Flows added and ended now, and every end before the next SimPy event that
        completes no coflow (:func:`fluid_kernel.run`); coflows completed are reported at
        their instant."""
        self._update_pending = False
        state, env, now = self.state, self.env, self.env.now
        floor = np.inf
        if self.links.stale:
            changed = self.links.refresh()
            state.set_links(self.links.capacity)
            rebound = state.set_paths(
                self._routes, self.links.binding, changed, self.links.flipped)
            floor = 0.0 if changed else floor
            self._relink(rebound)
        if self._arrived:
            arrived, self._arrived = self._arrived, []
            self._add(arrived)
            floor = 0.0
        at, wait, completed = state.run(now, self._updated_at, env.peek(), floor)
        while state.hot_links.size:
            # Replays short of headroom join the network at ``at``; solve again there.
            assert self.replays is not None
            hot = self.replays.short(state.hot_links, at)
            joined = self._hand_over(self.replays.on(hot), at) if hot.size else []
            if not joined:
                break  # the replays there end at this instant: nothing of theirs is left
            self._add(joined)
            at, wait, more = state.run(at, at, at, 0.0)
            completed = np.concatenate([completed, more])
        self._updated_at = at
        self._timer += 1
        if state.active_flows:
            timer = self._timer
            delay = wait if at == now else (at + wait) - now
            env.timeout(delay).callbacks.append(lambda _e: self._on_timer(timer))
        events = [self._waiting.pop(int(g)) for g in completed]
        if at == now:
            self._succeed(events)
        elif events:
            env.timeout(at - now).callbacks.append(lambda _e: self._succeed(events))

    def _relink(self, rebound: np.ndarray) -> None:
        """Links or binding changed: room for the replays' per-link counts, and no replay
        may go on from a solo run over paths whose binding links changed (``rebound``)."""
        if self.replays is None:
            return
        self.replays.fit()
        stale = self.replays.rebind(rebound)
        if stale:
            self._arrived += self._hand_over(stale, self.env.now)

    @staticmethod
    def _succeed(events: list[simpy.Event]) -> None:
        for event in events:
            event.succeed()

    def _local(
        self, dst: int, nbytes: float, done: simpy.Event
    ) -> Callable[[simpy.Event], None]:
        """The callback delivering a message that crossed no link."""

        def arrived(_event: simpy.Event) -> None:
            self.bytes_received[dst] += nbytes
            self._local_done += 1
            done.succeed()

        return arrived

    # ------------------------------------------------------------------ collectives
    def collective(
        self,
        op: str,
        gpus: Sequence[int],
        nbytes: float = 0.0,
        algorithm: str | None = None,
        send_bytes: np.ndarray | None = None,
        chunks: int | None = None,
    ) -> simpy.Event:
        """Run one collective over ``gpus`` (in ring order; ``gpus[0]`` is the root)."""
        if op not in OPS:
            raise InputError("op", op, " | ".join(OPS))
        algorithm = algorithm or DEFAULT_ALGORITHM[op]
        fan_in = True
        if op == "all_to_all" and algorithm in deepep.KERNELS:
            # DeepEP's kernels put to every peer at once: the direct pairs' coflow of the
            # bytes its paths move (RDMA to the relay, NVLink from it; deepep.send_matrix),
            # without NCCL's incast share, as deepep.py prices them in fast mode.
            algorithm, fan_in = "direct", False
        allowed = DAG_ALGORITHMS[op] + (COMPOSED if op in COMPOSED_OPS else ())
        if algorithm not in allowed:
            raise InputError("algorithm", algorithm, " | ".join(allowed))
        ranks = list(self._groups.get(tuple(gpus)) or self._check_group(gpus))
        if op == "all_to_all" and algorithm == "direct":
            # The one DAG all_to_all has (direct pairs), run as one coflow.
            return self._all_to_all(ranks, send_matrix(len(ranks), nbytes, send_bytes), fan_in)
        steps = self.steps(op, ranks, nbytes, send_bytes, chunks, algorithm)
        return self.run_steps(*steps, relay=op == "send_recv")

    def _check_group(self, gpus: Sequence[int]) -> list[int]:
        """``gpus`` as checked GPU ids (remembered: a step calls the same groups often)."""
        ranks = [self.topology.check_gpu(g) for g in gpus]
        if len(set(ranks)) != len(ranks) or not ranks:
            raise InputError("gpus", list(gpus), "a non-empty list of distinct GPU ids")
        self._groups[tuple(gpus)] = ranks
        return ranks

    def steps(
        self,
        op: str,
        ranks: list[int],
        nbytes: float,
        send_bytes: np.ndarray | None,
        chunks: int | None,
        algorithm: str | None = None,
    ) -> Dag:
        """The transfers of a collective and, for each, the transfers it waits for (the
        catalogue's DAG of ``algorithm``, the op's default when None)."""
        if algorithm in COMPOSED:
            steps, radices = composed_steps(self.topology, op, ranks, algorithm == "multilevel")
            return composed_dag(ranks, nbytes, steps, radices)
        return transfer_dag(op, algorithm or DEFAULT_ALGORITHM[op], ranks, nbytes, send_bytes,
                            chunks, self.topology.gpus_per_node)

    def receive(self, dst: int, sources: Sequence[tuple[int, float]]) -> simpy.Event:
        """GPU ``dst`` pulls ``bytes`` from each ``(src, bytes)`` at once; fires when all are in."""
        return self.run_steps([(src, dst, float(b)) for src, b in sources], [[] for _ in sources])

    def run_steps(
        self, transfers: list[tuple[int, int, float]], deps: list[list[int]],
        relay: bool = False,
    ) -> simpy.Event:
        """Start each transfer once the transfers it depends on are done; one event for all
        (``relay``: on point-to-point routes, else direct ones)."""
        done = self.env.event()
        waiting = [len(d) for d in deps]
        dependents: list[list[int]] = [[] for _ in transfers]
        for i, before in enumerate(deps):
            for j in before:
                dependents[j].append(i)
        left = [len(transfers)]

        def start(i: int) -> None:
            src, dst, size = transfers[i]
            self._send(src, dst, size, relay).callbacks.append(finished(i))

        def finished(i: int) -> Callable[[simpy.Event], None]:
            def callback(_event: simpy.Event) -> None:
                left[0] -= 1
                for j in dependents[i]:
                    waiting[j] -= 1
                    if waiting[j] == 0:
                        start(j)
                if left[0] == 0:
                    done.succeed()

            return callback

        if not transfers:
            done.succeed()
        for i, w in enumerate(waiting):
            if w == 0:
                start(i)
        return done


def composed_steps(
    topology: Topology, op: str, ranks: list[int], every_level: bool
) -> tuple[list[Step], list[int]]:
    """The level steps of a hierarchical (``every_level``: multilevel) collective over
    ``ranks`` and the members per level; the group must hold as many GPUs on every node,
    node after node."""
    per = topology.gpus_per_node
    nodes = [r // per for r in ranks]
    gpn = nodes.count(nodes[0])
    packed = len(set(nodes)) * gpn == len(ranks) and all(
        nodes[i] == nodes[i - i % gpn] for i in range(len(ranks)))
    if not packed:
        raise InputError("gpus", list(ranks), "as many GPUs on every node, node by node "
                         "(a hierarchical collective)")
    levels = level_ranks(topology.fabric(), len(ranks), gpn, every_level)
    return decompose(op, levels), [k for k, _ in levels]


def send_matrix(n: int, nbytes: float, send_bytes: np.ndarray | None) -> np.ndarray:
    """Bytes rank i sends rank j in an all-to-all(v): ``send_bytes`` (its shape checked; its
    values by :func:`check_values` before first use) or ``nbytes/n`` (checked here)."""
    if send_bytes is None:
        if not 0 <= nbytes < np.inf:
            raise InputError("nbytes", nbytes, ">= 0, finite")
        return np.full((n, n), nbytes / n)
    matrix = np.asarray(send_bytes, dtype=float)
    if matrix.shape != (n, n):
        raise bad_matrix(matrix, n)
    return matrix


def check_values(matrix: np.ndarray) -> None:
    """An all-to-all(v)'s bytes are non-negative and finite: NaN entries would be skipped
    and inf ones "sent" at once (bytes counted: inf)."""
    # Two reductions, no temporaries: NaN makes both comparisons false.
    if not (matrix.min() >= 0 and matrix.max() < np.inf):
        raise bad_matrix(matrix, matrix.shape[0])


def bad_matrix(matrix: np.ndarray, n: int) -> InputError:
    """The error for an all-to-all(v) matrix over ``n`` ranks of another shape or with bad
    bytes."""
    return InputError("send_bytes", matrix.shape, f"a non-negative finite {n}x{n} matrix")


def check_bytes(nbytes: float) -> None:
    """A message's bytes are non-negative and finite (inf would count as sent and "arrive"
    at once)."""
    if not 0 <= nbytes < np.inf:
        raise InputError("nbytes", nbytes, ">= 0, finite")
