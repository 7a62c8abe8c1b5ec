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


@dataclass
class _Flow:
    src: int
    dst: int
    nbytes: float
    links: np.ndarray
    done: simpy.Event


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
        self._link_index: dict[LinkId, int] = {}
        self._capacity: list[float] = []
        self._paths: dict[tuple[int, int], tuple[np.ndarray, float]] = {}
        # Active flows: parallel arrays plus one (flow, link) row per link a flow crosses.
        self._flows = np.empty(0, dtype=object)
        self._remaining = np.zeros(0)
        self._size = np.zeros(0)
        self._rate = np.zeros(0)
        self._edge_flow = np.zeros(0, dtype=np.int64)
        self._edge_link = np.zeros(0, dtype=np.int64)
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
        """Link indices and total latency of the route (cached)."""
        key = (src, dst)
        if key not in self._paths:
            route = self.topology.route(src, dst)
            index = np.array([self._link(lid) for lid in route], dtype=np.int64)
            self._paths[key] = (index, self.topology.latency(route))
        return self._paths[key]

    def _link(self, link_id: LinkId) -> int:
        if link_id not in self._link_index:
            bandwidth = self.topology.link(link_id).bandwidth
            self._link_index[link_id] = len(self._capacity)
            self._capacity.append(bandwidth / self.variance.link_factor(link_id))
        return self._link_index[link_id]

    @property
    def active_flows(self) -> int:
        return len(self._flows)

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
        now = self.env.now
        self._remaining -= self._rate * (now - self._updated_at)
        self._updated_at = now
        # A flow whose remaining time is below the clock's resolution at ``now`` can never be
        # drained by advancing time (now + wait == now): retire it, or the timer spins forever.
        resolution = 4.0 * np.spacing(max(abs(now), 1.0))
        left = self._remaining <= DONE_TOLERANCE * self._size
        if self._rate.size == self._remaining.size:
            left |= self._remaining <= self._rate * resolution
        self._retire(left)
        self._admit()
        self.recomputations += 1
        capacity = np.asarray(self._capacity)
        self._rate = max_min_rates(self._edge_flow, self._edge_link, len(self._flows), capacity)
        self._timer += 1
        if self._flows.size:
            wait = float((self._remaining / self._rate).min())
            timer = self._timer
            self.env.timeout(max(wait, 0.0)).callbacks.append(lambda _e: self._on_timer(timer))

    def _retire(self, done: np.ndarray) -> None:
        if not done.any():
            return
        keep = ~done
        finished = self._flows[done]
        new_pos = np.cumsum(keep) - 1
        edge_keep = keep[self._edge_flow]
        self._edge_flow = new_pos[self._edge_flow[edge_keep]]
        self._edge_link = self._edge_link[edge_keep]
        self._flows = self._flows[keep]
        self._remaining, self._size = self._remaining[keep], self._size[keep]
        self._rate = self._rate[keep]
        for flow in finished:
            self._finish(flow)

    def _admit(self) -> None:
        if not self._arrived:
            return
        new, self._arrived = self._arrived, []
        first = len(self._flows)
        counts = [f.links.size for f in new]
        owners = np.repeat(np.arange(first, first + len(new)), counts)
        self._edge_flow = np.concatenate([self._edge_flow, owners])
        self._edge_link = np.concatenate([self._edge_link, *(f.links for f in new)])
        sizes = np.array([f.nbytes for f in new])
        self._remaining = np.concatenate([self._remaining, sizes])
        self._size = np.concatenate([self._size, sizes])
        self._rate = np.concatenate([self._rate, np.zeros(len(new))])
        added = np.empty(len(new), dtype=object)
        added[:] = new
        self._flows = np.concatenate([self._flows, added])

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
