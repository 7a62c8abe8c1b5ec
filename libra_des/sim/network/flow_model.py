"""Flow-level network for the detailed fidelity mode.

Model (assumptions stated once):
- A transfer is a *flow* on the topology's route between two GPUs. It first waits the route's
  latency (the sum of its links' one-way latencies, paid once), then drains its bytes at a
  rate that links share max-min fairly (progressive filling) with every other active flow.
- Links are full duplex: each direction of an edge has its own capacity. A degraded link (see
  :class:`~libra_des.hardware.variance.VarianceModel`) has its capacity divided by its factor.
- Rates change only when a flow starts or ends. Such changes at one instant are coalesced into
  one recomputation, and only one "next completion" timer is live: a newer timer makes older
  ones stale (SimPy cannot cancel a timeout, so a stale one fires and is ignored).
- A transfer to the same GPU, or of zero bytes, moves nothing through the network.

Solving: a link that every route through it shares with a link no wider is dropped from the
problem: it can never bind (:class:`LinkTable`). The max-min solver (progressive filling, and
the incremental re-solve used after each change) lives in :mod:`libra_des.sim.network.solver`;
its names are re-exported here.

Collectives run as the transfer DAG the chosen algorithm gives in the collective catalogue
(:mod:`libra_des.hardware.collective_catalogue`; ``nbytes`` follows nccl-tests' ``size``): a
transfer starts once the transfers it waits for have arrived. The algorithm defaults to the
op's usual one (ring, or direct for all_to_all and send_recv); one without a DAG (tree, nvls)
is refused. ``hierarchical`` and ``multilevel`` run the steps the cost model prices
(:mod:`libra_des.hardware.hierarchy`) as flat rings per level, one after another.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import simpy

from libra_des.errors import InputError
from libra_des.hardware.collective_catalogue import (
    COMPOSED,
    COMPOSED_OPS,
    DAG_ALGORITHMS,
    DEFAULT_ALGORITHM,
    OPS,
    Dag,
    chain,
    composed_dag,
    direct_pairs,
    ring,
    transfer_dag,
)
from libra_des.hardware.hierarchy import Step, decompose, level_ranks
from libra_des.hardware.topology import LinkId, Topology
from libra_des.hardware.variance import VarianceModel
from libra_des.sim.network.solver import (
    CHECK_TOLERANCE,
    MAX_DENSE_LINKS,
    MAX_TRIES,
    TIE_TOLERANCE,
    bottleneck_levels,
    bottleneck_links,
    max_min_rates,
    reassign,
    refill,
    restrict,
    settle,
)

__all__ = [  # the solver's and the catalogue's names stay importable from here (they were here)
    "CHECK_TOLERANCE", "DAG_ALGORITHMS", "DONE_TOLERANCE", "MAX_DENSE_LINKS", "MAX_TRIES",
    "OPS", "TIE_TOLERANCE", "FlowTable", "LinkTable", "Network", "bottleneck_levels",
    "bottleneck_links", "chain", "direct_pairs", "flow_edges", "max_min_rates", "reassign",
    "refill", "restrict", "ring", "settle",
]

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


@dataclass
class _Flow:
    src: int
    dst: int
    nbytes: float
    links: np.ndarray
    done: simpy.Event


class FlowTable:
    """Active flows, oldest first: parallel arrays plus one (flow, link) row per binding link
    a flow crosses, rows grouped by flow. ``bneck`` is a flow's bottleneck link (-1: not
    known yet)."""

    def __init__(self) -> None:
        self.flows: list[_Flow] = []
        self.remaining = np.zeros(0)
        self.size = np.zeros(0)
        self.rate = np.zeros(0)
        self.bneck = np.zeros(0, dtype=np.int64)
        self.edge_flow = np.zeros(0, dtype=np.int64)
        self.edge_link = np.zeros(0, dtype=np.int64)

    def advance(self, elapsed: float, now: float) -> tuple[list[_Flow], float]:
        """Drain ``elapsed`` seconds, drop the flows now done; return them and the slowest
        one's rate (inf if none)."""
        self.remaining -= self.rate * elapsed
        # A flow whose remaining time is below the clock's resolution at ``now`` can never be
        # drained by advancing time (now + wait == now): retire it, or the timer spins forever.
        resolution = 4.0 * np.spacing(max(abs(now), 1.0))
        done = (self.remaining <= DONE_TOLERANCE * self.size) | (
            self.remaining <= self.rate * resolution
        )
        if not done.any():
            return [], np.inf
        slowest = float(self.rate[done].min())
        gone = np.flatnonzero(done).tolist()
        finished = [self.flows[i] for i in gone]
        for i in reversed(gone):
            del self.flows[i]
        keep = ~done
        new_pos = np.cumsum(keep) - 1
        edge_keep = keep[self.edge_flow]
        self.edge_flow = new_pos[self.edge_flow[edge_keep]]
        self.edge_link = self.edge_link[edge_keep]
        self.remaining, self.size = self.remaining[keep], self.size[keep]
        self.rate, self.bneck = self.rate[keep], self.bneck[keep]
        return finished, slowest

    def add(self, new: list[_Flow], binding: np.ndarray) -> None:
        owners, links = flow_edges(new, len(self.flows), binding)
        self.edge_flow = np.concatenate([self.edge_flow, owners])
        self.edge_link = np.concatenate([self.edge_link, links])
        sizes = np.array([f.nbytes for f in new])
        self.remaining = np.concatenate([self.remaining, sizes])
        self.size = np.concatenate([self.size, sizes])
        self.rate = np.concatenate([self.rate, np.zeros(len(new))])
        self.bneck = np.concatenate([self.bneck, np.full(len(new), -1)])
        self.flows.extend(new)

    def rebind(self, binding: np.ndarray) -> None:
        """Rebuild the rows for a new set of binding links; bottlenecks are forgotten."""
        self.edge_flow, self.edge_link = flow_edges(self.flows, 0, binding)
        self.bneck.fill(-1)

    def next_end(self) -> float:
        """Seconds until the first flow ends at the current rates."""
        return float((self.remaining / self.rate).min())


def flow_edges(
    flows: list[_Flow], first: int, binding: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(flow, link) rows of ``flows``, numbered from ``first``, on binding links only."""
    if not flows:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    links = np.concatenate([f.links for f in flows])
    owners = np.repeat(np.arange(first, first + len(flows)), [f.links.size for f in flows])
    keep = binding[links]
    return owners[keep], links[keep]


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
        self.table = FlowTable()
        self._paths: dict[tuple[int, int], tuple[np.ndarray, float]] = {}
        self._arrived: list[_Flow] = []
        self._updated_at = 0.0
        self._timer = 0
        self._update_pending = False

    # ------------------------------------------------------------------ transfers
    def transfer(self, src: int, dst: int, nbytes: float) -> simpy.Event:
        """Send ``nbytes`` from GPU ``src`` to GPU ``dst``; the event fires on arrival."""
        if not nbytes >= 0:
            raise InputError("nbytes", nbytes, ">= 0")
        links, latency = self.path(src, dst)
        done = self.env.event()
        self.bytes_sent[src] += nbytes
        flow = _Flow(src, dst, float(nbytes), links, done)
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
        return len(self.table.flows)

    # ------------------------------------------------------------------ rate bookkeeping
    def _arrive(self, flow: _Flow) -> None:
        self._arrived.append(flow)
        if not self._update_pending:
            # Coalesce every change at this instant into one recomputation.
            self._update_pending = True
            self.env.timeout(0).callbacks.append(self._update)

    def _on_timer(self, timer: int) -> None:
        if timer == self._timer:
            self._update(None)

    def _update(self, _event: simpy.Event | None) -> None:
        self._update_pending = False
        table, now = self.table, self.env.now
        finished, floor = table.advance(now - self._updated_at, now)
        self._updated_at = now
        if self.links.stale and self.links.refresh():
            table.rebind(self.links.binding)
            floor = 0.0
        if self._arrived:
            table.add(self._arrived, self.links.binding)
            self._arrived = []
            floor = 0.0
        if floor < np.inf:
            self.recomputations += 1
            self.fallbacks += refill(
                table.edge_flow, table.edge_link, self.links.capacity, table.rate, table.bneck,
                table.rate >= floor * (1.0 - TIE_TOLERANCE),
            )
        self._timer += 1
        if table.flows:
            timer = self._timer
            self.env.timeout(table.next_end()).callbacks.append(lambda _e: self._on_timer(timer))
        for flow in finished:
            self._finish(flow)

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
        algorithm = algorithm or DEFAULT_ALGORITHM[op]
        allowed = DAG_ALGORITHMS[op] + (COMPOSED if op in COMPOSED_OPS else ())
        if algorithm not in allowed:
            raise InputError("algorithm", algorithm, " | ".join(allowed))
        ranks = [self.topology.check_gpu(g) for g in gpus]
        if len(set(ranks)) != len(ranks) or not ranks:
            raise InputError("gpus", list(gpus), "a non-empty list of distinct GPU ids")
        steps = self.steps(op, ranks, nbytes, send_bytes, chunks, algorithm)
        return self.run_steps(*steps)

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
