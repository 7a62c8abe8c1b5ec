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

Solving (exact up to float round-off; the results are those of progressive filling):
- A link that every route through it shares with a link no wider is dropped from the
  problem: it can never bind (:class:`LinkTable`).
- When flows end, only flows at least as fast as the slowest of them can change rate
  (:func:`refill`). Those are re-solved from their old bottleneck links: with each flow's
  bottleneck known, the fair levels follow from one triangular linear solve instead of
  progressive filling's rounds (:func:`bottleneck_levels`), and the max-min conditions are
  checked; flows failing them move bottleneck and the part above the lowest failure is
  solved again (:func:`settle`). Progressive filling (:func:`max_min_rates`) is the
  fallback. A 64-GPU all-to-all(v) whose flows all end at different instants recomputes
  rates about 4,000 times, so each recomputation must cost little more than a few passes
  over the flows.

Collectives decompose into transfers (``nbytes`` follows nccl-tests' ``size``):
ring all_reduce (2(n-1) steps of ``nbytes/n`` to the next rank), ring all_gather and
reduce_scatter (n-1 steps), pipelined-chain broadcast (``chunks`` pieces forwarded rank to
rank), direct all_to_all(v) (every pair at once; ``send_bytes[i, j]`` from rank i to j, the
diagonal stays local) and send_recv. In a ring, rank r starts step k+1 once its own step-k
send is done and it has received step k from rank r-1 (the data it forwards).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import simpy
from scipy.linalg.lapack import dtrtrs

from libra_des.errors import InputError
from libra_des.hardware.topology import LinkId, Topology
from libra_des.hardware.variance import VarianceModel

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
#: Relative slack of the max-min checks (saturation, feasibility, bottleneck order).
CHECK_TOLERANCE = 1e-10
#: Flows this close (relative) below a level that is recomputed are recomputed too (ties).
TIE_TOLERANCE = 1e-9
#: Guided solves per recomputation before progressive filling settles what is left.
MAX_TRIES = 8
#: Most bottleneck links one dense triangular solve takes (more: progressive filling).
MAX_DENSE_LINKS = 2048


def max_min_rates(
    edge_flow: np.ndarray, edge_link: np.ndarray, n_flows: int, capacity: np.ndarray
) -> np.ndarray:
    """Max-min fair rates by progressive filling.

    ``edge_flow[e]`` crosses ``edge_link[e]``; ``capacity[l]`` is link ``l``'s bytes/s. All
    unfrozen flows rise together and a flow freezes at the fair share of the first of its
    links to saturate. Each round freezes every link whose fair share is the smallest on all
    the flows crossing it: nothing frozen earlier can change such a link's share, so several
    bottlenecks settle per round (the global minimum always does, so the loop ends).
    """
    rate = np.zeros(n_flows)
    flow, link = np.asarray(edge_flow), np.asarray(edge_link)
    if np.any(flow[1:] < flow[:-1]):
        order = np.argsort(flow, kind="stable")
        flow, link = flow[order], link[order]
    if flow.size == 0:
        return rate
    # Edges are grouped by flow: segment s (flow seg_flow[s]) has lengths[s] edges.
    starts = np.concatenate(([0], np.flatnonzero(flow[1:] != flow[:-1]) + 1))
    seg_flow, lengths = flow[starts], np.diff(np.append(starts, flow.size))
    left = np.array(capacity, dtype=float)
    share = np.empty_like(left)
    while link.size:
        count = np.bincount(link, minlength=left.size)
        share.fill(np.inf)
        np.divide(left, count, out=share, where=count > 0)
        edge_share = share[link]
        flow_min = np.minimum.reduceat(edge_share, starts)
        edge_min = np.repeat(flow_min, lengths)
        ready = np.bincount(link[edge_share <= edge_min * (1.0 + 1e-12)], minlength=left.size)
        frozen = np.logical_or.reduceat(ready[link] == count[link], starts)
        rate[seg_flow[frozen]] = flow_min[frozen]
        hit = np.repeat(frozen, lengths)
        left -= np.bincount(link[hit], weights=edge_min[hit], minlength=left.size)
        np.maximum(left, 0.0, out=left)
        link = link[~hit]
        seg_flow, lengths = seg_flow[~frozen], lengths[~frozen]
        starts = np.cumsum(lengths) - lengths
    return rate


def bottleneck_links(
    edge_flow: np.ndarray, edge_link: np.ndarray, rate: np.ndarray, capacity: np.ndarray
) -> np.ndarray:
    """Each flow's bottleneck in a max-min allocation: the lowest-numbered saturated link of
    its route on which no flow runs faster (every flow has one; -1 if round-off hid it)."""
    flow_rate = rate[edge_flow]
    load = np.bincount(edge_link, weights=flow_rate, minlength=capacity.size)
    fastest = np.zeros(capacity.size)
    np.maximum.at(fastest, edge_link, flow_rate)
    slack = 1.0 - CHECK_TOLERANCE
    ok = (load >= capacity * slack)[edge_link] & (flow_rate >= fastest[edge_link] * slack)
    bneck = np.full(rate.size, capacity.size)
    np.minimum.at(bneck, edge_flow[ok], edge_link[ok])
    bneck[bneck == capacity.size] = -1
    return bneck


def bottleneck_levels(
    edge_flow: np.ndarray,
    edge_link: np.ndarray,
    capacity: np.ndarray,
    bneck: np.ndarray,
    key: np.ndarray,
) -> np.ndarray | None:
    """Fair level of each bottleneck link if flow ``f`` runs at the level of ``bneck[f]``.

    Each bottleneck link ``l`` gives one equation, ``sum over its flows of
    level[bneck[f]] = capacity[l]``. Taken in level order (``key`` guesses it; ties by link
    number), a flow's bottleneck never comes after another of its links, so the system is
    lower triangular and one forward substitution stands in for progressive filling's
    rounds. A flow whose bottleneck does come later moves to its earliest link first.
    Links that are nobody's bottleneck get level inf; None if the system is too big.
    """
    n_links = capacity.size
    used = np.zeros(n_links, dtype=bool)
    used[bneck] = True
    links = np.flatnonzero(used)
    links = links[np.argsort(key[links], kind="stable")]
    row, col = _positions(edge_flow, edge_link, bneck, links, n_links)
    late = col > row
    if late.any():
        move = np.zeros(bneck.size, dtype=bool)
        move[edge_flow[late]] = True
        reassign(edge_flow, edge_link, np.where(used, key, np.inf), move, bneck)
        used[:] = False
        used[bneck] = True
        links = links[used[links]]
        row, col = _positions(edge_flow, edge_link, bneck, links, n_links)
    k = links.size
    if k > MAX_DENSE_LINKS:
        return None
    # Row k collects the edges on links that are nobody's bottleneck; it is dropped.
    system = np.bincount(row * k + col, minlength=(k + 1) * k)[: k * k].astype(float)
    # A C-ordered matrix is its transpose in Fortran order: solve (M^T)^T x = c.
    solved, info = dtrtrs(system.reshape(k, k).T, capacity[links], lower=0, trans=1)
    if info != 0:
        return None
    level = np.full(n_links, np.inf)
    level[links] = solved
    return level


def _positions(
    edge_flow: np.ndarray, edge_link: np.ndarray, bneck: np.ndarray, order: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per edge, the place in ``order`` of its link (``order.size`` if absent) and of its
    flow's bottleneck; ``n`` links in all."""
    pos = np.full(n, order.size)
    pos[order] = np.arange(order.size)
    return pos[edge_link], pos[bneck][edge_flow]


def reassign(
    edge_flow: np.ndarray,
    edge_link: np.ndarray,
    level: np.ndarray,
    move: np.ndarray,
    bneck: np.ndarray,
) -> None:
    """Point each flow in ``move`` at its route's lowest-level link (ties: lowest number)."""
    mine = move[edge_flow]
    flow, link = edge_flow[mine], edge_link[mine]
    order = np.lexsort((link, level[link], flow))
    flow, link = flow[order], link[order]
    first = np.ones(flow.size, dtype=bool)
    first[1:] = flow[1:] != flow[:-1]
    bneck[flow[first]] = link[first]


def restrict(
    edge_flow: np.ndarray,
    edge_link: np.ndarray,
    capacity: np.ndarray,
    rate: np.ndarray,
    chosen: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Edges of the ``chosen`` flows (renumbered) and what the other flows leave of each link."""
    if chosen.all():
        return edge_flow, edge_link, capacity
    part = chosen[edge_flow]
    others = np.where(chosen, 0.0, rate)[edge_flow]
    left = np.maximum(capacity - np.bincount(edge_link, others, capacity.size), 0.0)
    index = np.cumsum(chosen) - 1
    return index[edge_flow[part]], edge_link[part], left


def settle(
    edge_flow: np.ndarray,
    edge_link: np.ndarray,
    capacity: np.ndarray,
    rate: np.ndarray,
    bneck: np.ndarray,
    key: np.ndarray,
    tries: int = MAX_TRIES,
) -> bool:
    """Max-min rates into ``rate`` from a guessed bottleneck per flow; True if it fell back.

    A try solves :func:`bottleneck_levels` and checks the defining property of the (unique)
    max-min allocation: feasible, and every flow runs at the level of a saturated link on
    which no flow is faster. Below the lowest level at which a check fails, every flow's
    bottleneck is saturated by flows no faster than it and every link leaves the other flows
    at least that level: progressive filling's exact state there. Those flows are final;
    the rest try again on what they leave, the failing ones moved to their route's
    lowest-level link. Progressive filling settles whatever ``tries`` leave.
    """
    level = bottleneck_levels(edge_flow, edge_link, capacity, bneck, key) if tries else None
    if level is None:
        rate[:] = max_min_rates(edge_flow, edge_link, rate.size, capacity)
        bneck[:] = bottleneck_links(edge_flow, edge_link, rate, capacity)
        return True
    new = level[bneck]
    flow_rate = new[edge_flow]
    tol = 1.0 + CHECK_TOLERANCE
    over = np.bincount(edge_link, flow_rate, capacity.size) > capacity * tol
    if over.any():
        # Nobody's bottleneck yet, an overloaded link's level is at least its equal share.
        level[over] = capacity[over] / np.bincount(edge_link, minlength=capacity.size)[over]
    bad = flow_rate > (level * tol)[edge_link]
    if not bad.any():
        rate[:] = new
        return False
    move = np.zeros(rate.size, dtype=bool)
    move[edge_flow[bad]] = True
    reassign(edge_flow, edge_link, level, move, bneck)
    final = (new < level[edge_link[bad]].min() * (1.0 - TIE_TOLERANCE)) & (new > 0)
    rate[final] = new[final]
    rest = ~final
    flow, link, left = restrict(edge_flow, edge_link, capacity, new, rest)
    part_rate, part_bneck = new[rest], bneck[rest]
    fell_back = settle(flow, link, left, part_rate, part_bneck, level, tries - 1)
    rate[rest], bneck[rest] = part_rate, part_bneck
    return fell_back


def refill(
    edge_flow: np.ndarray,
    edge_link: np.ndarray,
    capacity: np.ndarray,
    rate: np.ndarray,
    bneck: np.ndarray,
    redo: np.ndarray,
) -> bool:
    """Recompute in place the max-min rates of the flows in ``redo``; the others keep theirs.

    Right for ``redo`` = every flow, and after some flows left for ``redo`` = the flows at
    least as fast as the slowest leaver (up to TIE_TOLERANCE): progressive filling below
    that level runs exactly as before (a leaver's links saturate no earlier than its own
    rate), so the rest is max-min on what the slower flows leave of each link. Old
    bottlenecks guide :func:`settle`; a new flow (``bneck`` -1) starts on its route's link
    of smallest equal share. Returns True if progressive filling was needed.
    """
    if not redo.any():
        return False
    flow, link, left = restrict(edge_flow, edge_link, capacity, rate, redo)
    guess, old = bneck[redo], rate[redo]
    key = np.full(capacity.size, np.inf)
    known = guess >= 0
    key[guess[known]] = old[known]
    if not known.all():
        share = left / np.maximum(np.bincount(link, minlength=left.size), 1)
        reassign(flow, link, share, ~known, guess)
        fresh = guess[~known]
        key[fresh] = np.minimum(share[fresh], key[fresh])
    fell_back = settle(flow, link, left, old, guess, key)
    rate[redo], bneck[redo] = old, guess
    return fell_back


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
