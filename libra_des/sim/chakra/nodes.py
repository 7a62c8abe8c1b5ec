"""Imported Chakra nodes checked before a replay: each node's fields, then the agreements
between ranks that a replay would otherwise discover as a hang or a silent mismatch.

Every refusal is one :class:`~libra_des.errors.InputError` whose field names the file, the
node (its position and id) and the attribute, e.g. ``libra.3.et: node 12 (id 40).comm_size``.

Checks (our reading of what ASTRA-sim needs of a trace set):

- typed attributes: ``comm_size`` (required on communication nodes, as ASTRA-sim reads it),
  ``comm_src``/``comm_dst``, ``comm_tag`` and ``comm_type`` hold integers; ``duration_s`` a
  number; ``pg_name`` a communicator id (decimal digits, as ASTRA-sim parses it) that
  ``comm_group.json`` lists, with this rank among its members;
- bounds: sizes up to :data:`MAX_BYTES`, durations up to :data:`MAX_SECONDS`;
- the n-th collective of a group has the same op and ``comm_size`` on every member;
- every send has one receive of the same (source, destination, tag) and the same size.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any

from libra_des.errors import InputError
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
MAX_SECONDS, MAX_BYTES = 86400.0, 10**15
#: The communicator every rank belongs to when a collective names none.
WORLD = ""


@dataclass(frozen=True)
class EtNode:
    """One node as the replay needs it. ``seconds`` is a compute node's duration, or a
    collective's recorded duration when its ``comm_size`` is 0 (``timed``: no bytes to
    price)."""

    rank: int
    id: int
    name: str
    kind: int
    deps: tuple[int, ...]
    where: str = ""
    seconds: float = 0.0
    op: str = ""
    nbytes: float = 0.0
    peer: int = -1
    tag: int = 0
    group: str = WORLD
    timed: bool = False


def integer(a: dict[str, Any], key: str, where: str, top: int, default: int | None = None
            ) -> int:
    """An integer attribute within 0..top (a bool, text or float is refused)."""
    value = a.get(key, default)
    if value is None:
        raise InputError(f"{where}.{key}", "(missing)", f"an integer in 0..{top:,}")
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
        raise InputError(f"{where}.{key}", value, f"an integer in 0..{top:,}")
    return value


def seconds(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            math.isfinite(value) and 0 <= value <= MAX_SECONDS):
        raise InputError(where, value, f"a duration in seconds between 0 and {MAX_SECONDS:g}")
    return float(value)


def label(path: str, index: int, node: Any) -> str:
    return f"{path}: node {index} (id {node.id})"


def parse_node(node: Any, rank: int, ranks: int, where: str) -> EtNode:
    """Check one protobuf Node and keep what the replay uses."""
    a = attrs(node)
    kind = int(node.type)
    if not 0 <= kind < len(NODE_TYPES):
        raise InputError(f"{where}.type", kind, " | ".join(NODE_TYPES))
    base = EtNode(rank, int(node.id), node.name, kind,
                  tuple(sorted(set(node.ctrl_deps) | set(node.data_deps))), where)
    recorded = (seconds(a["duration_s"], f"{where}.duration_s") if "duration_s" in a
                else seconds(node.duration_micros * 1e-6, f"{where}.duration_micros"))
    if kind == COMP_NODE:
        return replace(base, seconds=recorded)
    if kind == COMM_COLL_NODE:
        ctype = integer(a, "comm_type", where, len(COLLECTIVE_TYPES) - 1, 0)
        if COLLECTIVE_TYPES[ctype] not in COLLECTIVE_OPS:
            raise InputError(f"{where}.comm_type", COLLECTIVE_TYPES[ctype],
                             " | ".join(COLLECTIVE_OPS))
        group = a.get("pg_name", WORLD)
        if not isinstance(group, str) or not (group == WORLD or group.isdigit()):
            raise InputError(f"{where}.pg_name", group, "a communicator id (decimal digits)")
        size = integer(a, "comm_size", where, MAX_BYTES)
        return replace(base, op=COLLECTIVE_OPS[COLLECTIVE_TYPES[ctype]], nbytes=float(size),
                       group=group, timed=size == 0, seconds=recorded if size == 0 else 0.0)
    if kind in (COMM_SEND_NODE, COMM_RECV_NODE):
        key = "comm_dst" if kind == COMM_SEND_NODE else "comm_src"
        peer = integer(a, key, where, ranks - 1)
        if peer == rank:
            raise InputError(f"{where}.{key}", peer, f"another rank in 0..{ranks - 1}")
        return replace(base, nbytes=float(integer(a, "comm_size", where, MAX_BYTES)),
                       peer=peer, tag=integer(a, "comm_tag", where, 2**63 - 1, 0))
    return base


def check_deps(traces: dict[int, list[EtNode]]) -> None:
    """Node ids unique per rank; every dependency names a node of the same rank."""
    for nodes in traces.values():
        ids: set[int] = set()
        for n in nodes:
            if n.id in ids:
                raise InputError(f"{n.where}.id", n.id, "ids unique within the file")
            ids.add(n.id)
        for n in nodes:
            missing = [d for d in n.deps if d not in ids]
            if missing:
                raise InputError(f"{n.where}.deps", missing[0], "ids of nodes in the same file")


def check_groups(traces: dict[int, list[EtNode]], groups: dict[str, list[int]]) -> None:
    """Each collective names a known group holding its rank; the n-th collective of a group
    has one op and one size on every member."""
    for name, members in groups.items():
        missing = [r for r in members if r not in traces]
        if not members or missing:
            raise InputError(f"comm_group.{name}", members, "ranks that have a trace")
    seen: dict[str, list[EtNode]] = {}
    order: dict[tuple[int, str], int] = defaultdict(int)
    for rank, nodes in sorted(traces.items()):
        for n in nodes:
            if n.kind != COMM_COLL_NODE:
                continue
            if n.group != WORLD and n.group not in groups:
                raise InputError(f"{n.where}.pg_name", n.group,
                                 f"a communicator id of comm_group.json ({len(groups)} ids)")
            if n.group != WORLD and rank not in groups[n.group]:
                raise InputError(f"{n.where}.pg_name", n.group,
                                 f"a group holding rank {rank}")
            k = order[(rank, n.group)]
            order[(rank, n.group)] += 1
            first = seen.setdefault(n.group, [])
            if k == len(first):
                first.append(n)
                continue
            ref = first[k]
            for fld, mine, theirs in (("comm_type", n.op, ref.op),
                                      ("comm_size", n.nbytes, ref.nbytes)):
                if mine != theirs:
                    raise InputError(f"{n.where}.{fld}", mine, f"{theirs} as on rank "
                                     f"{ref.rank} (collective {k} of group "
                                     f"{n.group or 'world'}; {ref.where})")


def check_p2p(traces: dict[int, list[EtNode]]) -> None:
    """Every send meets one receive of the same (source, destination, tag) and size."""
    sends: dict[tuple[int, int, int], EtNode] = {}
    recvs: dict[tuple[int, int, int], EtNode] = {}
    for nodes in traces.values():
        for n in nodes:
            if n.kind not in (COMM_SEND_NODE, COMM_RECV_NODE):
                continue
            send = n.kind == COMM_SEND_NODE
            key = (n.rank, n.peer, n.tag) if send else (n.peer, n.rank, n.tag)
            side = sends if send else recvs
            if key in side:
                raise InputError(f"{n.where}.comm_tag", n.tag, "a tag unused by another "
                                 f"{'send' if send else 'receive'} of the same two ranks")
            side[key] = n
    for key, s in sends.items():
        r = recvs.get(key)
        if r is None:
            raise InputError(f"{s.where}.comm_dst", s.peer, f"a rank whose trace receives "
                             f"from {s.rank} with tag {s.tag}")
        if r.nbytes != s.nbytes:
            raise InputError(f"{r.where}.comm_size", r.nbytes, f"{s.nbytes:.0f}, the size "
                             f"of the matching send ({s.where})")
    for key, r in recvs.items():
        if key not in sends:
            raise InputError(f"{r.where}.comm_src", r.peer, f"a rank whose trace sends to "
                             f"{r.rank} with tag {r.tag}")
