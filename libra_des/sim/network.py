"""Flow-level network for the detailed fidelity mode.

Model (assumptions stated once):
- A transfer is a *flow* on the topology's route between two GPUs. It first waits the route's
  latency (the sum of its links' one-way latencies, paid once), then drains its bytes at a
  rate that links share max-min fairly (progressive filling) with every other active flow.
- Links are full duplex: each direction of an edge has its own capacity. A degraded link (see
  :class:`~libra_des.hardware.variance.VarianceModel`) has its capacity divided by its factor.
- Rates change only when a flow starts or ends. Such changes at one instant are coalesced into
  one recomputation, and only one "next completion" timer is live: a newer timer makes older
  ones stale (SimPy cannot cancel a timeout, so a stale one fires and is ignored). Flows
  whose finish times fall within DONE_TOLERANCE of each other end in the same update.
- A transfer to the same GPU, or of zero bytes, moves nothing through the network.

Solving: a link that every route through it shares with a link no wider is dropped from the
problem: it can never bind (:class:`LinkTable`). A change re-solves only the flows it can
affect (:class:`~libra_des.sim.flow_solver.ComponentMaxMin`: the connected group of flows
around the links that changed, and after departures only those at least as fast as the
slowest leaver). Each flow keeps the bytes it had left when its rate last changed, and a heap
of drain times gives the next completion, so an update costs in proportion to the flows it
re-solves, not to all active flows. The solvers live in :mod:`libra_des.sim.flow_solver`;
their names are re-exported here.

Collectives decompose into transfers (``nbytes`` follows nccl-tests' ``size``):
ring all_reduce (2(n-1) steps of ``nbytes/n`` to the next rank), ring all_gather and
reduce_scatter (n-1 steps), pipelined-chain broadcast (``chunks`` pieces forwarded rank to
rank), direct all_to_all(v) (every pair at once; ``send_bytes[i, j]`` from rank i to j, the
diagonal stays local) and send_recv. In a ring, rank r starts step k+1 once its own step-k
send is done and it has received step k from rank r-1 (the data it forwards).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import simpy

from libra_des.errors import InputError
from libra_des.hardware.topology import LinkId, Topology
from libra_des.hardware.variance import VarianceModel
from libra_des.sim.flow_solver import (
    CHECK_TOLERANCE,
    MAX_DENSE_LINKS,
    MAX_TRIES,
    TIE_TOLERANCE,
    ComponentMaxMin,
    bottleneck_levels,
    bottleneck_links,
    max_min_rates,
    reassign,
    refill,
    restrict,
    settle,
)

__all__ = [  # the solver's names stay importable from here (they lived here before)
    "ALGORITHMS", "CHECK_TOLERANCE", "DONE_TOLERANCE", "MAX_DENSE_LINKS", "MAX_TRIES", "OPS",
    "TIE_TOLERANCE", "ComponentMaxMin", "LinkTable", "Network", "bottleneck_levels",
    "bottleneck_links", "chain", "direct_pairs", "max_min_rates", "reassign",
    "refill", "restrict", "ring", "settle",
]

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv")
ALGORITHMS = {
    "all_reduce": ("ring",),
    "all_gather": ("ring",),
    "reduce_scatter": ("ring",),
    "broadcast": ("ring",),
    "all_to_all": ("direct",),
    "send_recv": ("direct",),
}

#: A flow is done when fewer bytes than this share of its size are left (float round-off).
DONE_TOLERANCE = 1e-9
class LinkTable:
    """The directed links the network has routed over, numbered in order of first use.

    Besides each link's capacity it tracks which links can ever limit a flow. Link ``l`` is
    *implied* by link ``m`` when every route seen so far through ``l`` also crosses ``m``
    and ``m`` is no wider: ``m``'s load is then at least ``l``'s, so ``l`` never binds and
    dropping its constraint leaves the max-min allocation as it was (for equal capacities
    and equal route sets the higher-numbered link is dropped). A GPU's PCIe hops in front of
    its NIC are implied by the NIC port, for example. A new route can undo an implication,
    so the set is refreshed whenever routes were added.
    """

    def __init__(self, topology: Topology, variance: VarianceModel) -> None:
        self.topology = topology
        self.variance = variance
        self.index: dict[LinkId, int] = {}
        self._capacity: list[float] = []
        self._common: list[set[int] | None] = []  # other links on every route through l
        self.binding = np.ones(0, dtype=bool)
        self.capacity = np.zeros(0)
        self.stale = False

    def number(self, link_id: LinkId) -> int:
        if link_id not in self.index:
            bandwidth = self.topology.link(link_id).bandwidth
            self.index[link_id] = len(self._capacity)
            self._capacity.append(bandwidth / self.variance.link_factor(link_id))
            self._common.append(None)
        return self.index[link_id]

    def add_route(self, links: list[int]) -> None:
        on_route = set(links)
        for link in links:
            common = self._common[link]
            if common is None:
                self._common[link] = on_route - {link}
            else:
                common &= on_route
        self.stale = True

    def refresh(self) -> bool:
        """Recompute :attr:`binding` (and :attr:`capacity`); True if it changed."""
        self.stale = False
        self.capacity = np.array(self._capacity)
        pairs = [(a, b) for a, common in enumerate(self._common) for b in common or ()]
        binding = np.ones(len(self._capacity), dtype=bool)
        if pairs:
            lo, hi = np.array(pairs).T
            mutual = np.array([a in (self._common[b] or ()) for a, b in pairs])
            cap = self.capacity
            tie = cap[hi] == cap[lo]
            implied = (cap[hi] < cap[lo]) | (tie & (~mutual | (hi < lo)))
            binding[lo[implied]] = False
        changed = binding.size != self.binding.size or bool((binding != self.binding).any())
        self.binding = binding
        return changed


@dataclass(eq=False)
class _Flow:
    """A transfer on the network. While active, ``left`` bytes remained at time ``since``
    and it has drained at ``rate`` bytes/s since then; ``version`` counts rate changes (a
    finish-time entry of an older version is stale)."""

    src: int
    dst: int
    nbytes: float
    links: np.ndarray
    done: simpy.Event
    ident: int = 0
    left: float = 0.0
    since: float = 0.0
    rate: float = 0.0
    version: int = 0

    def left_at(self, now: float) -> float:
        return self.left - self.rate * (now - self.since)


class Network:
    """Max-min fair flow network over a :class:`Topology` (see module docstring)."""

    def __init__(
        self, env: simpy.Environment, topology: Topology, variance: VarianceModel | None = None
    ) -> None:
        self.env = env
        self.topology = topology
        self.variance = variance or VarianceModel.none()
        self.bytes_sent = np.zeros(topology.num_gpus)
        self.bytes_received = np.zeros(topology.num_gpus)
        self.flows_done = 0
        self.recomputations = 0
        #: Recomputations that needed progressive filling (the guided solve did not settle).
        self.fallbacks = 0
        self.links = LinkTable(topology, self.variance)
        self.solver = ComponentMaxMin()
        self._active: dict[int, _Flow] = {}
        #: (drain time, flow id, version) of every active flow's latest rate; stale rows stay.
        self._ends: list[tuple[float, int, int]] = []
        self._next_id = 0
        self._paths: dict[tuple[int, int], tuple[np.ndarray, float]] = {}
        self._arrived: list[_Flow] = []
        self._timer = 0
        self._armed_at = np.inf
        self._update_pending = False

    # ------------------------------------------------------------------ transfers
    def transfer(self, src: int, dst: int, nbytes: float) -> simpy.Event:
        """Send ``nbytes`` from GPU ``src`` to GPU ``dst``; the event fires on arrival."""
        if not nbytes >= 0:
            raise InputError("nbytes", nbytes, ">= 0")
        links, latency = self.path(src, dst)
        done = self.env.event()
        self.bytes_sent[src] += nbytes
        flow = _Flow(src, dst, float(nbytes), links, done, self._next_id, float(nbytes))
        self._next_id += 1
        if links.size == 0 or nbytes == 0:
            self.env.timeout(latency).callbacks.append(lambda _e: self._finish(flow))
        elif latency > 0:
            self.env.timeout(latency).callbacks.append(lambda _e: self._arrive(flow))
        else:
            self._arrive(flow)
        return done

    def path(self, src: int, dst: int) -> tuple[np.ndarray, float]:
        """Link numbers and total latency of the route (cached)."""
        key = (src, dst)
        if key not in self._paths:
            route = self.topology.route(src, dst)
            numbers = [self.links.number(lid) for lid in route]
            self.links.add_route(numbers)
            self._paths[key] = (np.array(numbers, dtype=np.int64), self.topology.latency(route))
        return self._paths[key]

    @property
    def active_flows(self) -> int:
        return len(self._active)

    # ------------------------------------------------------------------ rate bookkeeping
    def _arrive(self, flow: _Flow) -> None:
        self._arrived.append(flow)
        if not self._update_pending:
            # Coalesce every change at this instant into one recomputation.
            self._update_pending = True
            self.env.timeout(0).callbacks.append(self._update)

    def _on_timer(self, timer: int) -> None:
        if timer == self._timer:
            self._armed_at = np.inf
            self._update(None)

    def _update(self, _event: simpy.Event | None) -> None:
        """Retire the flows done by now, admit the arrived ones, re-solve the rates of the
        components they touch and re-arm the one timer at the earliest drain time."""
        self._update_pending = False
        now, solver = self.env.now, self.solver
        finished = self._drained(now)
        touched: set[int] = set()
        floor = np.inf
        for flow in finished:
            floor = min(floor, flow.rate)
            touched.update(solver.routes[flow.ident])
            solver.remove(flow.ident)
            del self._active[flow.ident]
        if self.links.stale and self._rebind():
            touched = set(solver.on_link)
            floor = 0.0
        for flow in self._arrived:
            route = tuple(flow.links[self.links.binding[flow.links]].tolist())
            self._active[flow.ident] = flow
            flow.since = now
            solver.add(flow.ident, route)
            touched.update(route)
            floor = 0.0
        self._arrived = []
        if touched:
            self.recomputations += 1
            for ident, rate in solver.solve(touched, floor).items():
                self._set_rate(self._active[ident], rate, now)
        self._arm(now)
        for flow in finished:
            self._finish(flow)

    def _rebind(self) -> bool:
        """Refresh the binding links; if they changed, re-route every active flow on them."""
        changed = self.links.refresh()
        self.solver.capacity = self.links.capacity
        if changed:
            binding = self.links.binding
            for flow in self._active.values():
                self.solver.remove(flow.ident)
                self.solver.add(flow.ident, tuple(flow.links[binding[flow.links]].tolist()))
        return changed

    def _set_rate(self, flow: _Flow, rate: float, now: float) -> None:
        if rate == flow.rate and flow.version:
            return
        flow.left = flow.left_at(now)
        flow.since, flow.rate = now, rate
        flow.version += 1
        if rate > 0:
            heapq.heappush(self._ends, (now + flow.left / rate, flow.ident, flow.version))

    def _drained(self, now: float) -> list[_Flow]:
        """Pop the flows done at ``now``: fewer than DONE_TOLERANCE of their bytes left, or
        less than the clock can resolve at ``now`` (now + wait == now: it could never drain
        by advancing time)."""
        resolution = 4.0 * float(np.spacing(max(abs(now), 1.0)))
        ends, done = self._ends, []
        while ends:
            _, ident, version = ends[0]
            flow = self._active.get(ident)
            if flow is None or flow.version != version:
                heapq.heappop(ends)
                continue
            left = flow.left_at(now)
            if left > DONE_TOLERANCE * flow.nbytes and left > flow.rate * resolution:
                break
            heapq.heappop(ends)
            done.append(flow)
        return done

    def _arm(self, now: float) -> None:
        """Keep one live timer at the earliest drain time (a newer one makes older stale)."""
        ends = self._ends
        while ends and (ends[0][1] not in self._active
                        or self._active[ends[0][1]].version != ends[0][2]):
            heapq.heappop(ends)
        at = ends[0][0] if ends else np.inf
        if at == self._armed_at or at == np.inf:
            return
        self._timer += 1
        self._armed_at = at
        timer = self._timer
        self.env.timeout(max(at - now, 0.0)).callbacks.append(lambda _e: self._on_timer(timer))

    def _finish(self, flow: _Flow) -> None:
        self.bytes_received[flow.dst] += flow.nbytes
        self.flows_done += 1
        flow.done.succeed()

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
        algorithm = algorithm or ALGORITHMS[op][0]
        if algorithm not in ALGORITHMS[op]:
            raise InputError("algorithm", algorithm, " | ".join(ALGORITHMS[op]))
        ranks = [self.topology.check_gpu(g) for g in gpus]
        if len(set(ranks)) != len(ranks) or not ranks:
            raise InputError("gpus", list(gpus), "a non-empty list of distinct GPU ids")
        steps = self.steps(op, ranks, nbytes, send_bytes, chunks)
        return self.run_steps(*steps)

    def steps(
        self,
        op: str,
        ranks: list[int],
        nbytes: float,
        send_bytes: np.ndarray | None,
        chunks: int | None,
    ) -> tuple[list[tuple[int, int, float]], list[list[int]]]:
        """The transfers of a collective and, for each, the transfers it waits for."""
        n = len(ranks)
        if op == "all_to_all":
            return direct_pairs(ranks, nbytes, send_bytes)
        if op == "send_recv":
            if n != 2:
                raise InputError("gpus", ranks, "exactly two GPUs [src, dst] for send_recv")
            return [(ranks[0], ranks[1], nbytes)], [[]]
        if op == "broadcast":
            return chain(ranks, nbytes, chunks or n)
        ring_steps = 2 * (n - 1) if op == "all_reduce" else n - 1
        return ring(ranks, nbytes / n, ring_steps)

    def run_steps(
        self, transfers: list[tuple[int, int, float]], deps: list[list[int]]
    ) -> simpy.Event:
        """Start each transfer once the transfers it depends on are done; one event for all."""
        done = self.env.event()
        waiting = [len(d) for d in deps]
        dependents: list[list[int]] = [[] for _ in transfers]
        for i, before in enumerate(deps):
            for j in before:
                dependents[j].append(i)
        left = [len(transfers)]

        def start(i: int) -> None:
            src, dst, size = transfers[i]
            self.transfer(src, dst, size).callbacks.append(finished(i))

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


def ring(
    ranks: list[int], chunk: float, steps: int
) -> tuple[list[tuple[int, int, float]], list[list[int]]]:
    """``steps`` rounds in which rank r sends ``chunk`` to rank r+1 (index k*n + r)."""
    n = len(ranks)
    transfers = [(ranks[r], ranks[(r + 1) % n], chunk) for _ in range(steps) for r in range(n)]
    deps = [
        [] if k == 0 else [(k - 1) * n + r, (k - 1) * n + (r - 1) % n]
        for k in range(steps)
        for r in range(n)
    ]
    return transfers, deps


def chain(
    ranks: list[int], nbytes: float, chunks: int
) -> tuple[list[tuple[int, int, float]], list[list[int]]]:
    """Pipelined broadcast along ``ranks``: chunk c crosses hop h after c on h-1, c-1 on h."""
    hops = len(ranks) - 1
    transfers = [
        (ranks[h], ranks[h + 1], nbytes / chunks) for c in range(chunks) for h in range(hops)
    ]
    deps: list[list[int]] = []
    for c in range(chunks):
        for h in range(hops):
            i = c * hops + h
            deps.append(([i - 1] if h > 0 else []) + ([i - hops] if c > 0 else []))
    return transfers, deps


def direct_pairs(
    ranks: list[int], nbytes: float, send_bytes: np.ndarray | None
) -> tuple[list[tuple[int, int, float]], list[list[int]]]:
    """All-to-all(v): every ordered pair at once; uniform ``nbytes / n`` per pair if no matrix."""
    n = len(ranks)
    if send_bytes is None:
        matrix = np.full((n, n), nbytes / n)
    else:
        matrix = np.asarray(send_bytes, dtype=float)
        if matrix.shape != (n, n) or (matrix < 0).any():
            raise InputError("send_bytes", matrix.shape, f"a non-negative {n}x{n} matrix")
    transfers = [
        (ranks[i], ranks[j], float(matrix[i, j]))
        for i in range(n)
        for j in range(n)
        if i != j and matrix[i, j] > 0
    ]
    return transfers, [[] for _ in transfers]
