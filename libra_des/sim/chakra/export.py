"""A simulated training step (its Chrome trace) as Chakra execution traces, one per rank.

Built from the document :func:`libra_des.results.trace.chrome_trace` returns, so it shows exactly
what was simulated. Per traced GPU (a per-GPU compute track; with grouped tracks, the first
GPU of each group stands for it), in start-time order:

- every op span is a ``COMP_NODE`` (``duration_micros`` rounded to whole microseconds; the
  exact seconds in attr ``duration_s``), control-dependent on the rank's previous op;
- every pipeline hand-off is a ``COMM_SEND_NODE`` on the producing rank (data-dependent on
  the op that produced the activations) and a ``COMM_RECV_NODE`` on the consuming rank (the
  consuming op is data-dependent on it), matched by ``comm_src``/``comm_dst``/``comm_tag``;
- every gradient bucket is a ``COMM_COLL_NODE`` ``ALL_REDUCE`` of the replicated weights'
  gradients over DP x CP and, for MoE models, a second over DP for this GPU's experts, each
  data-dependent on the rank's last op that ended before the bucket began and on the
  previous bucket; ``pg_name`` names the group, listed in ``comm_group.json`` (rank lists,
  the comm-group file ASTRA-sim takes).

``comm_size`` is bytes per GPU (the all-reduce buffer, the hand-off message). Times are those
of the simulated step; ``start_time_micros`` is kept for readers that draw timelines.
"""

from __future__ import annotations

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
    classes,
    encode_trace,
)

VERSION = "0.0.4"  # the Chakra schema version these files follow (GlobalMetadata.version)
_GPU = re.compile(r"stage (\d+) GPU (\d+)$")
_GROUP = re.compile(r"stage (\d+) compute \(GPUs (\d+)-(\d+)\)$")
_COMM = re.compile(r"stage (\d+) comm$")
US = 1e-6


@dataclass
class RankTrace:
    """The nodes of one rank, built in order."""

    rank: int
    nodes: list[Any] = field(default_factory=list)

    def add(self, name: str, kind: int, start_us: float, dur_us: float, **attr: Any) -> Any:
        node = classes()["Node"](id=len(self.nodes), name=name, type=kind,
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
    pid: int
    stage: int
    rank: int
    tid: int


def tracks(events: list[Mapping[str, Any]]) -> tuple[list[Track], dict[tuple[int, int], int]]:
    """Compute tracks (one rank each) and the comm track of every (pid, stage)."""
    computes, comms = [], {}
    for ev in events:
        if ev.get("ph") != "M" or ev.get("name") != "thread_name":
            continue
        label = str(ev["args"]["name"])
        if (m := _GPU.match(label)) or (m := _GROUP.match(label)):
            computes.append(Track(ev["pid"], int(m.group(1)), int(m.group(2)), ev["tid"]))
        elif m := _COMM.match(label):
            comms[(ev["pid"], int(m.group(1)))] = ev["tid"]
    return sorted(computes, key=lambda t: t.rank), comms


def spans(events: list[Mapping[str, Any]]) -> dict[tuple[int, int], list[Mapping[str, Any]]]:
    out: dict[tuple[int, int], list[Mapping[str, Any]]] = defaultdict(list)
    for ev in events:
        if ev.get("ph") == "X":
            out[(ev["pid"], ev["tid"])].append(ev)
    for v in out.values():
        v.sort(key=lambda e: (e["ts"], e["name"]))
    return out


def export(trace: Mapping[str, Any]) -> tuple[dict[int, bytes], dict[str, list[int]]]:
    """({rank: .et file bytes}, comm groups) of a training run's Chrome trace."""
    events = list(trace.get("traceEvents", []))
    computes, comms = tracks(events)
    by_track = spans(events)
    ranks = {t.rank: RankTrace(t.rank) for t in computes}
    stride = stage_stride(computes)
    ops: dict[int, list[tuple[float, Any]]] = {}  # rank -> (end us, node) of its compute ops
    for t in computes:
        rt, prev, ends = ranks[t.rank], None, []
        for ev in by_track[(t.pid, t.tid)]:
            node = rt.add(ev["name"], COMP_NODE, ev["ts"], ev["dur"],
                          duration_s=float(ev["dur"]) * US, is_cpu_op=False)
            if prev is not None:
                node.ctrl_deps.append(prev.id)
            prev = node
            ends.append((float(ev["ts"]) + float(ev["dur"]), node))
        ops[t.rank] = ends
    groups: dict[str, list[int]] = {}
    last: dict[int, Any] = {}  # rank -> its latest collective node
    tag = 0
    for t in computes:
        for ev in by_track.get((t.pid, comms.get((t.pid, t.stage), -1)), []):
            args = ev.get("args", {})
            if ev["name"].startswith("recv "):
                src = t.rank + (int(args["src_stage"]) - t.stage) * stride
                if src in ranks:
                    hand_off(ranks, ops, (src, t.rank), ev, tag)
                    tag += 1
            elif ev["name"].startswith("grad-sync") and float(ev["dur"]) > 0:
                bucket(ranks[t.rank], ops[t.rank], ev, (t, stride), groups, last)
    meta = classes()["GlobalMetadata"](version=VERSION)
    put_attr(meta, "producer", "libra-des")
    files = {r: encode_trace(meta, in_order(rt.nodes)) for r, rt in sorted(ranks.items())}
    return files, dict(sorted(groups.items()))


def stage_stride(computes: list[Track]) -> int:
    """GPUs per pipeline stage (rank = stage * stride + position; ``trace.py``)."""
    per_stage = defaultdict(list)
    for t in computes:
        per_stage[t.stage].append(t.rank)
    if len(per_stage) < 2:
        return max((len(v) for v in per_stage.values()), default=1)
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
    # The consumer is the op the hand-off is named after ("recv F mb0 c0" feeds "F mb0 c0").
    consumer = next((node for _, node in ops[dst] if node.name == ev["name"][5:]), None)
    if consumer is not None:
        consumer.data_deps.append(recv.id)


def in_order(nodes: list[Any]) -> list[Any]:
    """Nodes in a topological order, earliest start first among the ready ones (a reader
    meets every node after the nodes it depends on)."""
    import heapq

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
           where: tuple[Track, int], groups: dict[str, list[int]], last: dict[int, Any]
           ) -> None:
    """One gradient bucket's all-reduces (module doc) on rank ``t.rank``."""
    t, stride = where
    args = ev.get("args", {})
    base = t.stage * stride
    dense, expert = int(args.get("group", 1)), int(args.get("expert_group", 1))
    position = t.rank - base
    width = stride // max(expert, 1)  # GPUs per entity (CP); experts reduce over DP
    parts = [(f"dp_cp_stage{t.stage}", float(args.get("bytes", 0)),
              list(range(base, base + dense)))]
    parts.append((f"dp_stage{t.stage}_cp{position % width}", float(args.get("expert_bytes", 0)),
                  [base + i * width + position % width for i in range(expert)]))
    before = [node for end, node in ends if end <= float(ev["ts"]) + 1e-6]
    for name, size, members in parts:
        if size <= 0 or len(members) < 2:
            continue
        groups[name] = members
        node = rt.add(f"{ev['name']} {name}", COMM_COLL_NODE, ev["ts"], ev["dur"],
                      comm_type=COLLECTIVE_TYPES.index("ALL_REDUCE"),
                      comm_size=round(size), pg_name=name, is_cpu_op=False)
        if before:
            node.data_deps.append(before[-1].id)
        if t.rank in last:
            node.data_deps.append(last[t.rank].id)
        last[t.rank] = node
