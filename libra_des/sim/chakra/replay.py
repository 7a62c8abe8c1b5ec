"""Run Chakra execution traces on a modelled fabric (SimPy).

Each rank's nodes run once every node they depend on (``ctrl_deps`` and ``data_deps``) has
finished. Assumptions (ASTRA-sim's reading of the format where it has one):

- ``COMP_NODE``: its recorded duration (attr ``duration_s`` when present, else
  ``duration_micros``) on the rank's one compute stream, in the order nodes become ready;
- ``COMM_COLL_NODE``: the rank's one collective stream; a collective starts when every
  member of its group (``pg_name`` in the comm-group file, else every rank) has reached its
  n-th collective of that group, and lasts what the cost model prices for the op, ``comm_size``
  bytes (nccl-tests' size meaning) and the group's layout on the fabric (the network layer's
  algorithm choice, :meth:`~libra_des.hardware.collectives.communication.Communication.collective`);
  a collective of ``comm_size`` 0 has no bytes to price and lasts its recorded duration
  (``duration_s`` or ``duration_micros``; libra-des's export writes the exposed CP exchange
  so);
- ``COMM_SEND_NODE`` / ``COMM_RECV_NODE``: matched by (source, destination, tag); the message
  starts when both sides are ready and lasts one point-to-point transfer (same node or not);
  sends and receives do not hold the collective stream;
- metadata and memory nodes take no time (their dependencies still order the others).

:mod:`~libra_des.sim.chakra.nodes` checks the traces first (fields, groups, matching sends).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import simpy

from libra_des.errors import InputError
from libra_des.hardware.costs import CostModel
from libra_des.sim.chakra.nodes import EtNode, check_deps, check_groups, check_p2p
from libra_des.sim.chakra.schema import (
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
)


@dataclass
class Totals:
    """What the replay ran: compute seconds, bytes per op, per-rank finish times."""

    compute_s: float = 0.0
    bytes: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    p2p_bytes: float = 0.0
    comm_s: float = 0.0
    finish: dict[int, float] = field(default_factory=dict)

    def result(self, ranks: int, nodes: int) -> dict[str, Any]:
        return {"ranks": ranks, "nodes": nodes, "step_s": max(self.finish.values(), default=0),
                "compute_s": self.compute_s, "comm_s": self.comm_s,
                "collective_bytes": dict(sorted(self.bytes.items())),
                "p2p_bytes": self.p2p_bytes}


class Replay:
    """The SimPy model of a set of traces (module doc)."""

    def __init__(self, traces: dict[int, list[EtNode]], groups: dict[str, list[int]],
                 cost: CostModel) -> None:
        self.env = simpy.Environment()
        self.traces, self.cost, self.totals = traces, cost, Totals()
        self.groups = {k: sorted(v) for k, v in groups.items()}
        self.all = sorted(traces)
        self.done = {(r, n.id): self.env.event() for r, ns in traces.items() for n in ns}
        self.compute = {r: simpy.Resource(self.env) for r in traces}
        self.comm = {r: simpy.Resource(self.env) for r in traces}
        self.meet: dict[tuple[Any, ...], list[Any]] = {}
        self.seq: dict[tuple[int, str], int] = defaultdict(int)

    def members(self, node: EtNode) -> list[int]:
        return self.groups.get(node.group, self.all)

    def gpus_per_node(self, members: list[int]) -> int:
        per = self.cost.fabric.gpus_per_node
        counts: dict[int, int] = defaultdict(int)
        for r in members:
            counts[r // per] += 1
        return max(counts.values())

    def rendezvous(self, key: tuple[Any, ...], count: int) -> Any:
        """An event firing when ``count`` parties have arrived under ``key``."""
        arrived = self.meet.setdefault(key, [self.env.event(), 0])
        arrived[1] += 1
        if arrived[1] == count:
            arrived[0].succeed()
        return arrived[0]

    def node(self, n: EtNode) -> Any:
        for d in n.deps:
            yield self.done[(n.rank, d)]
        if n.kind == COMP_NODE:
            with self.compute[n.rank].request() as slot:
                yield slot
                yield self.env.timeout(n.seconds)
            self.totals.compute_s += n.seconds
        elif n.kind == COMM_COLL_NODE:
            members = self.members(n)
            order = self.seq[(n.rank, n.group)]
            self.seq[(n.rank, n.group)] += 1
            with self.comm[n.rank].request() as slot:
                yield slot
                yield self.rendezvous(("coll", n.group, order), len(members))
                secs = n.seconds if n.timed else self.cost.collective(
                    n.op, n.nbytes, len(members), self.gpus_per_node(members)).seconds
                yield self.env.timeout(secs)
            self.totals.bytes[n.op] += n.nbytes
            self.totals.comm_s += secs
        elif n.kind in (COMM_SEND_NODE, COMM_RECV_NODE):
            src, dst = (n.rank, n.peer) if n.kind == COMM_SEND_NODE else (n.peer, n.rank)
            yield self.rendezvous(("p2p", src, dst, n.tag), 2)
            same = src // self.cost.fabric.gpus_per_node == dst // self.cost.fabric.gpus_per_node
            yield self.env.timeout(self.cost.p2p(n.nbytes, same))
            if n.kind == COMM_SEND_NODE:
                self.totals.p2p_bytes += n.nbytes
        self.done[(n.rank, n.id)].succeed()
        self.totals.finish[n.rank] = max(self.totals.finish.get(n.rank, 0.0), self.env.now)

    def run(self) -> dict[str, Any]:
        for nodes in self.traces.values():
            for n in nodes:
                self.env.process(self.node(n))
        self.env.run()
        stuck = [k for k, ev in self.done.items() if not ev.triggered]
        if stuck:
            rank, nid = stuck[0]
            raise InputError("ET", f"rank {rank} node {nid} never ran ({len(stuck)} stuck)",
                             "traces whose dependencies, collectives and sends/receives "
                             "all match up")
        return self.totals.result(len(self.traces), len(self.done))


def replay(traces: dict[int, list[EtNode]], groups: dict[str, list[int]], cost: CostModel
           ) -> dict[str, Any]:
    """Simulate the traces; the totals and the simulated step time."""
    check_deps(traces)
    check_groups(traces, groups)
    check_p2p(traces)
    return Replay(traces, groups, cost).run()
