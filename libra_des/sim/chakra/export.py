"""A simulated training step (its Chrome trace) as Chakra execution traces, one per rank.

Built from the document :func:`libra_des.results.trace.chrome_trace` returns, so it shows exactly
what was simulated. Every GPU of the traced rank groups gets its own file, also above the
trace's per-GPU track limit: a grouped compute track ("GPUs a-b") stands for each of its
GPUs, which run in lockstep, and each of them gets the track's nodes with its own peers and
groups. Per rank, in start-time order:

- every op span is a ``COMP_NODE`` (``duration_micros`` rounded to whole microseconds; the
  exact seconds in attr ``duration_s``), control-dependent on the rank's previous node; an
  op during which a gradient bucket starts is split there (``<op> part <j>``), so the bucket
  depends on the part of the backward that produced its gradients;
- the op's exposed context-parallel exchange (span arg ``attention_comm_exposed_s``, CP > 1)
  is a ``COMM_COLL_NODE`` ``ALL_TO_ALL`` over the rank's CP group right after the op's
  compute (the next op depends on it). The simulated trace holds its exposed seconds, not
  its bytes, so the node carries ``duration_micros``/``duration_s`` and ``comm_size`` 0
  (ASTRA-sim reads an empty exchange; ``libra-des import`` replays the recorded time);
- every pipeline hand-off is a ``COMM_SEND_NODE`` on the producing rank (data-dependent on
  the op that produced the activations) and a ``COMM_RECV_NODE`` on the consuming rank (the
  consuming op is data-dependent on it), matched by ``comm_src``/``comm_dst``/``comm_tag``;
- every gradient bucket is a ``COMM_COLL_NODE`` ``ALL_REDUCE`` of the replicated weights'
  gradients over DP x CP and, for MoE models, a second over DP for this GPU's experts, each
  data-dependent on the rank's last op that ended before the bucket began and on the
  previous bucket.

``pg_name`` is a communicator id, an integer written as decimal digits, and
``comm_group.json`` maps each id (same digits) to its ranks: ASTRA-sim parses both as
integers. Ids number the distinct groups in order of their sorted member lists.
``comm_size`` is bytes per GPU (the all-reduce buffer, the hand-off message). Times are
those of the simulated steps, one after another on one clock (a run of N steps exports all
N; a replay's ``step_s`` is then their total); ``start_time_micros`` is kept for readers
that draw timelines.
"""

from __future__ import annotations

import heapq
import itertools
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from libra_des.sim.chakra.schema import (
    COLLECTIVE_TYPES,
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    GlobalMetadata,
    Node,
    NodeKind,
    encode_trace,
)

VERSION = "0.0.4"  # the Chakra schema version these files follow (GlobalMetadata.version)
_GPU = re.compile(r"stage (\d+) GPU (\d+)$")
_GROUP = re.compile(r"stage (\d+) compute \(GPUs (\d+)-(\d+)\)$")
_COMM = re.compile(r"stage (\d+) comm$")
US = 1e-6
ALL_REDUCE = COLLECTIVE_TYPES.index("ALL_REDUCE")
ALL_TO_ALL = COLLECTIVE_TYPES.index("ALL_TO_ALL")


@dataclass
class RankTrace:
    """The nodes of one rank, built in order."""

    rank: int
    nodes: list[Any] = field(default_factory=list)

    def add(self, name: str, kind: NodeKind, start_us: float, dur_us: float, **attr: Any) -> Any:
        node = Node(id=len(self.nodes), name=name, type=kind,
                    start_time_micros=max(round(start_us), 0),
                    duration_micros=max(round(dur_us), 0))
        for key, value in attr.items():
            put_attr(node, key, value)
        self.nodes.append(node)
        return node


def put_attr(node: Any, key: str, value: Any) -> None:
    if isinstance(value, bool):
        node.attr.add(name=key, bool_val=value)
    elif isinstance(value, int):
        node.attr.add(name=key, int64_val=value)
    elif isinstance(value, float):
        node.attr.add(name=key, double_val=value)
    else:
        node.attr.add(name=key, string_val=str(value))


@dataclass(frozen=True)
class Track:
    """A compute track: the GPUs ``first..last`` of one (entity, stage)."""

    pid: int
    stage: int
    first: int
    last: int
    tid: int


def tracks(events: list[Mapping[str, Any]]) -> tuple[list[Track], dict[tuple[int, int], int]]:
    """Compute tracks and the comm track of every (pid, stage)."""
    computes, comms = [], {}
    for ev in events:
        if ev.get("ph") != "M" or ev.get("name") != "thread_name":
            continue
        label = str(ev["args"]["name"])
        if m := _GPU.match(label):
            computes.append(Track(ev["pid"], int(m[1]), int(m[2]), int(m[2]), ev["tid"]))
        elif m := _GROUP.match(label):
            computes.append(Track(ev["pid"], int(m[1]), int(m[2]), int(m[3]), ev["tid"]))
        elif m := _COMM.match(label):
            comms[(ev["pid"], int(m[1]))] = ev["tid"]
    return sorted(computes, key=lambda t: t.first), comms


def spans(events: list[Mapping[str, Any]]) -> dict[tuple[int, int], list[Mapping[str, Any]]]:
    out: dict[tuple[int, int], list[Mapping[str, Any]]] = defaultdict(list)
    for ev in events:
        if ev.get("ph") == "X":
            out[(ev["pid"], ev["tid"])].append(ev)
    for v in out.values():
        v.sort(key=lambda e: (e["ts"], e["name"]))
    return out


@dataclass
class Layout:
    """Rank arithmetic of the trace (``results/trace.py``): ``rank = stage * stride +
    entity * width + k``; CP groups are runs of ``cp`` consecutive ranks."""

    stride: int
    cp: int
    groups: dict[tuple[int, ...], int] = field(default_factory=dict)

    def group(self, members: list[int]) -> str:
        """The communicator id of ``members`` (numbered when the export ends)."""
        key = tuple(members)
        self.groups.setdefault(key, -1)
        return ",".join(map(str, key))

    def numbered(self) -> tuple[dict[str, str], dict[str, list[int]]]:
        """({member key: id}, {id: ranks}): ids in order of the sorted member lists."""
        ids = {",".join(map(str, k)): str(i) for i, k in enumerate(sorted(self.groups))}
        return ids, {ids[",".join(map(str, k))]: list(k) for k in sorted(self.groups)}


def export(trace: Mapping[str, Any]) -> tuple[dict[int, bytes], dict[str, list[int]]]:
    """({rank: .et file bytes}, comm groups {id: ranks}) of a training run's Chrome trace."""
    events = list(trace.get("traceEvents", []))
    computes, comms = tracks(events)
    by_track = spans(events)
    lay = Layout(stage_stride(computes), cp_width(events))
    ranks: dict[int, RankTrace] = {}
    ops: dict[int, list[tuple[float, Any]]] = {}  # rank -> (end us, node) of its compute ops
    for t in computes:
        comm = by_track.get((t.pid, comms.get((t.pid, t.stage), -1)), [])
        cuts = [float(ev["ts"]) for ev in comm if ev["name"].startswith("grad-sync")]
        for rank in range(t.first, t.last + 1):
            ranks[rank] = RankTrace(rank)
            ops[rank] = compute_nodes(ranks[rank], by_track[(t.pid, t.tid)], lay, cuts)
    last: dict[int, Any] = {}  # rank -> its latest collective node
    for t in computes:
        comm = by_track.get((t.pid, comms.get((t.pid, t.stage), -1)), [])
        for rank in range(t.first, t.last + 1):
            tag = 0
            for ev in comm:
                args = ev.get("args", {})
                if ev["name"].startswith("recv "):
                    src = rank + (int(args["src_stage"]) - t.stage) * lay.stride
                    if src in ranks:
                        hand_off(ranks, ops, (src, rank), ev, tag)
                    tag += 1
                elif ev["name"].startswith("grad-sync") and float(ev["dur"]) > 0:
                    bucket(ranks[rank], ops[rank], ev, (t.stage, lay), last)
    ids, groups = lay.numbered()
    meta = GlobalMetadata(version=VERSION)
    put_attr(meta, "producer", "libra-des")
    files = {}
    for r, rt in sorted(ranks.items()):
        for node in rt.nodes:
            for a in node.attr:
                if a.name == "pg_name":
                    a.string_val = ids[a.string_val]
        files[r] = encode_trace(meta, in_order(rt.nodes))
    return files, groups


def compute_nodes(rt: RankTrace, track: list[Mapping[str, Any]], lay: Layout,
                  cuts: list[float]) -> list[tuple[float, Any]]:
    """The rank's op nodes (module doc): (end us, node) of each piece's last node.

    An op during which a gradient bucket starts (``cuts``, in us) is split there, so the
    bucket can depend on the part of the backward that produced its gradients; each part
    keeps its share of the op's compute and exposed CP exchange."""
    prev, ends = None, []
    cp_base = rt.rank - rt.rank % lay.cp
    members = list(range(cp_base, cp_base + lay.cp))
    for ev in track:
        t0, dur = float(ev["ts"]), float(ev["dur"])
        exposed = float(ev.get("args", {}).get("attention_comm_exposed_s", 0.0)) / US
        share = min(exposed / dur, 1.0) if lay.cp > 1 and dur > 0 else 0.0
        bounds = [t0, *(c for c in cuts if t0 < c < t0 + dur), t0 + dur]
        for j, (a, b) in enumerate(itertools.pairwise(bounds)):
            name = ev["name"] if j == 0 else f"{ev['name']} part {j}"
            work = (b - a) * (1 - share)
            node = rt.add(name, COMP_NODE, a, work, duration_s=work * US, is_cpu_op=False)
            if prev is not None:
                node.ctrl_deps.append(prev.id)
            prev = node
            if share > 0:
                ex = rt.add(f"cp-exchange {name}", COMM_COLL_NODE, a + work, b - a - work,
                            comm_type=ALL_TO_ALL, comm_size=0, duration_s=(b - a - work) * US,
                            pg_name=lay.group(members), is_cpu_op=False)
                ex.data_deps.append(node.id)
                prev = ex
            ends.append((b, prev))
    return ends


def cp_width(events: list[Mapping[str, Any]]) -> int:
    """Context-parallel width: a bucket's ``group`` (DP x CP) over its ``expert_group``
    (DP; ``results/trace.bucket_args``); 1 when the trace holds no bucket."""
    for ev in events:
        args = ev.get("args", {})
        if ev.get("ph") == "X" and "expert_group" in args:
            return max(int(args["group"]) // max(int(args["expert_group"]), 1), 1)
    return 1


def stage_stride(computes: list[Track]) -> int:
    """GPUs per pipeline stage (rank = stage * stride + position; ``trace.py``)."""
    per_stage: dict[int, list[int]] = defaultdict(list)
    for t in computes:
        per_stage[t.stage] += [t.first, t.last]
    if len(per_stage) < 2:
        return max((max(v) - min(v) + 1 for v in per_stage.values()), default=1)
    first, second = sorted(per_stage)[:2]
    return (min(per_stage[second]) - min(per_stage[first])) // (second - first)


def producer(ends: list[tuple[float, Any]], at_us: float) -> Any:
    """The op of a rank whose end is nearest ``at_us`` (the one that sent the hand-off)."""
    return min(ends, key=lambda pair: abs(pair[0] - at_us))[1]


def hand_off(ranks: dict[int, RankTrace], ops: dict[int, list[tuple[float, Any]]],
             pair: tuple[int, int], ev: Mapping[str, Any], tag: int) -> None:
    src, dst = pair
    size = round(float(ev["args"]["bytes"]))
    send = ranks[src].add(f"send {ev['name'][5:]}", COMM_SEND_NODE, ev["ts"], ev["dur"],
                          comm_size=size, comm_dst=dst, comm_tag=tag, is_cpu_op=False)
    send.data_deps.append(producer(ops[src], float(ev["ts"])).id)
    recv = ranks[dst].add(ev["name"], COMM_RECV_NODE, ev["ts"], ev["dur"], comm_size=size,
                          comm_src=src, comm_tag=tag, is_cpu_op=False)
    # The consumer is the op the hand-off is named after ("recv F mb0 c0" feeds "F mb0 c0"),
    # the first of that name starting after the receive began (steps repeat the names).
    consumer = min((n for n in ranks[dst].nodes if n.type == COMP_NODE
                    and n.name == ev["name"][5:]
                    and n.start_time_micros >= recv.start_time_micros),
                   key=lambda n: n.start_time_micros, default=None)
    if consumer is not None:
        consumer.data_deps.append(recv.id)


def in_order(nodes: list[Any]) -> list[Any]:
    """Nodes in a topological order, earliest start first among the ready ones (a reader
    meets every node after the nodes it depends on)."""
    children: dict[int, list[int]] = defaultdict(list)
    waiting = {}
    for n in nodes:
        deps = set(n.ctrl_deps) | set(n.data_deps)
        waiting[n.id] = len(deps)
        for d in deps:
            children[d].append(n.id)
    ready = [(n.start_time_micros, n.id) for n in nodes if waiting[n.id] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, i = heapq.heappop(ready)
        out.append(nodes[i])
        for c in children[i]:
            waiting[c] -= 1
            if waiting[c] == 0:
                heapq.heappush(ready, (nodes[c].start_time_micros, c))
    assert len(out) == len(nodes), "the exported step's dependencies form a cycle"
    return out


def bucket(rt: RankTrace, ends: list[tuple[float, Any]], ev: Mapping[str, Any],
           where: tuple[int, Layout], last: dict[int, Any]) -> None:
    """One gradient bucket's all-reduces (module doc) on rank ``rt.rank``."""
    stage, lay = where
    args = ev.get("args", {})
    base = stage * lay.stride
    dense, expert = int(args.get("group", 1)), int(args.get("expert_group", 1))
    position = rt.rank - base
    width = lay.stride // max(expert, 1)  # GPUs per entity (CP); experts reduce over DP
    parts = [(float(args.get("bytes", 0)), list(range(base, base + dense))),
             (float(args.get("expert_bytes", 0)),
              [base + i * width + position % width for i in range(expert)])]
    before = [node for end, node in ends if end <= float(ev["ts"]) + 1e-6]
    for size, members in parts:
        if size <= 0 or len(members) < 2:
            continue
        node = rt.add(ev["name"], COMM_COLL_NODE, ev["ts"], ev["dur"], comm_type=ALL_REDUCE,
                      comm_size=round(size), pg_name=lay.group(members), is_cpu_op=False)
        if before:
            node.data_deps.append(before[-1].id)
        if rt.rank in last:
            node.data_deps.append(last[rt.rank].id)
        last[rt.rank] = node
