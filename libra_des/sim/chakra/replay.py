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
- ``COMM_SEND_NODE`` / ``COMM_RECV_NODE``: matched by (source, destination, tag); the message
  starts when both sides are ready and lasts one point-to-point transfer (same node or not);
  sends and receives do not hold the collective stream;
- metadata and memory nodes take no time (their dependencies still order the others).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import simpy

from libra_des.errors import InputError
from libra_des.hardware.costs import CostModel
from libra_des.sim.chakra.schema import (
    COLLECTIVE_TYPES,
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    NODE_TYPES,
    attrs,
)

#: Chakra collective types -> the cost model's op names (the others are refused).
COLLECTIVE_OPS = {"ALL_REDUCE": "all_reduce", "ALL_GATHER": "all_gather",
                  "REDUCE_SCATTER": "reduce_scatter", "ALL_TO_ALL": "all_to_all",
                  "BROADCAST": "broadcast"}
#: Largest duration or size one node may carry (our bounds: a day, a petabyte).
MAX_SECONDS, MAX_BYTES = 86400.0, 1e15


@dataclass(frozen=True)
class EtNode:
    """One node as the replay needs it."""

    rank: int
    id: int
    name: str
    kind: int
    deps: tuple[int, ...]
    seconds: float = 0.0
    op: str = ""
    nbytes: float = 0.0
    peer: int = -1
    tag: int = 0
    group: str = ""


def number(value: Any, where: str, what: str, top: float) -> float:
    if not isinstance(value, int | float) or not math.isfinite(value) or not 0 <= value <= top:
        raise InputError(where, value, f"{what} between 0 and {top:g}")
    return float(value)


def parse_node(node: Any, rank: int, ranks: int, where: str) -> EtNode:
    """Check one protobuf Node and keep what the replay uses."""
    a = attrs(node)
    kind = int(node.type)
    if not 0 <= kind < len(NODE_TYPES):
        raise InputError(f"{where}.type", kind, " | ".join(NODE_TYPES))
    base = EtNode(rank, int(node.id), node.name, kind,
                  tuple(sorted(set(node.ctrl_deps) | set(node.data_deps))))
    if kind == COMP_NODE:
        secs = a["duration_s"] if "duration_s" in a else node.duration_micros * 1e-6
        return EtNode(**{**base.__dict__, "seconds": number(secs, where, "a duration (s)",
                                                             MAX_SECONDS)})
    if kind not in (COMM_COLL_NODE, COMM_SEND_NODE, COMM_RECV_NODE):
        return base
    size = number(a.get("comm_size", 0), f"{where}.comm_size", "bytes", MAX_BYTES)
    if kind == COMM_COLL_NODE:
        ctype = a.get("comm_type", 0)
        name = COLLECTIVE_TYPES[ctype] if isinstance(ctype, int) and 0 <= ctype < len(
            COLLECTIVE_TYPES) else str(ctype)
        if name not in COLLECTIVE_OPS:
            raise InputError(f"{where}.comm_type", name, " | ".join(COLLECTIVE_OPS))
        return EtNode(**{**base.__dict__, "op": COLLECTIVE_OPS[name], "nbytes": size,
                         "group": str(a.get("pg_name", ""))})
    key = "comm_dst" if kind == COMM_SEND_NODE else "comm_src"
    peer = a.get(key)
    if not isinstance(peer, int) or not 0 <= peer < ranks or peer == rank:
        raise InputError(f"{where}.{key}", peer, f"another rank in 0..{ranks - 1}")
    return EtNode(**{**base.__dict__, "nbytes": size, "peer": peer,
                     "tag": int(a.get("comm_tag", 0))})


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
                secs = self.cost.collective(n.op, n.nbytes, len(members),
                                            self.gpus_per_node(members)).seconds
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


def check_deps(traces: dict[int, list[EtNode]]) -> None:
    for rank, nodes in traces.items():
        ids = {n.id for n in nodes}
        if len(ids) != len(nodes):
            raise InputError(f"rank {rank}", "duplicate node ids", "unique ids per rank")
        for n in nodes:
            missing = [d for d in n.deps if d not in ids]
            if missing:
                raise InputError(f"rank {rank} node {n.id}.deps", missing[0],
                                 "ids of nodes in the same trace")


def replay(traces: dict[int, list[EtNode]], groups: dict[str, list[int]], cost: CostModel
           ) -> dict[str, Any]:
    """Simulate the traces; the totals and the simulated step time."""
    check_deps(traces)
    for name, members in groups.items():
        if not members or any(r not in traces for r in members):
            raise InputError(f"comm_group.{name}", members, "ranks that have a trace")
    return Replay(traces, groups, cost).run()
