"""Chrome trace-event export of MoE prefill runs: every stage per GPU per layer.

One process per GPU of the expert-parallel group ("GPU g") and one for group-wide stages
(collectives that end together, CPU sharding); one thread per stage kind (a GPU runs its
local experts while its link dispatches, so kinds overlap and each needs its own track).
Spans are named ``<stage> L<layer>`` with batch and layer in the args. A counter per GPU
counts the transfers on its link (dispatch, combine, replica copies, metadata) over time.
Above :data:`~libra_des.results.trace.GPU_TRACK_LIMIT` GPUs only the first ones get processes and
``otherData.note`` says so. ``otherData`` also holds scenario, seed, version and code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from libra_des.config import MoeScenario as Scenario
from libra_des.results.trace import GPU_TRACK_LIMIT, counter, meta, metadata, span
from libra_des.sim.moe.simulator import STAGES

#: Stages that occupy a GPU's link (the rest run on its SMs or on the host CPU).
LINK_STAGES = ("dispatch", "combine", "replica_copy", "metadata")

Timeline = Sequence[tuple[int, int, str, int | None, float, float]]


def lanes(spans: list[tuple[float, float]]) -> list[int]:
    """Greedy interval partitioning: overlapping spans of one kind (a copy for the next layer
    running beside this layer's) go to separate lanes, since a track's spans must nest."""
    ends: list[float] = []
    out = [0] * len(spans)
    for i in sorted(range(len(spans)), key=lambda k: spans[k]):
        start, end = spans[i]
        lane = next((k for k, e in enumerate(ends) if e <= start), len(ends))
        if lane == len(ends):
            ends.append(end)
        ends[lane] = end
        out[i] = lane
    return out


def moe_trace(timeline: Timeline, scenario: Scenario, gpus: int) -> dict[str, Any]:
    """The trace document of one MoE prefill run (``timeline`` from ``simulate_moe``)."""
    shown = min(gpus, GPU_TRACK_LIMIT)
    group = shown  # pid of the group-wide process
    kinds = list(STAGES) + sorted({name for _, _, name, _, _, _ in timeline} - set(STAGES))
    tracks: dict[tuple[int, str], list[tuple[int, int, float, float]]] = {}
    links: dict[int, list[tuple[float, int]]] = {}
    for batch, layer, name, gpu, start, end in timeline:
        if start < 0 or end < start or (gpu is not None and gpu >= shown):
            continue
        pid = group if gpu is None else gpu
        tracks.setdefault((pid, name), []).append((batch, layer, start, end))
        if gpu is not None and name in LINK_STAGES:
            links.setdefault(gpu, []).extend([(start, 1), (end, -1)])
    events: list[dict[str, Any]] = [e for g in range(shown) for e in meta(g, None, f"GPU {g}")]
    events += meta(group, None, "group-wide")
    width = max((len(v) for v in tracks.values()), default=1)  # tids per kind, never reached
    for (pid, name), spans in sorted(tracks.items()):
        lane_of = lanes([(s, e) for _, _, s, e in spans])
        for lane in sorted(set(lane_of)):
            label = name if lane == 0 else f"{name} ({lane + 1})"
            events += meta(pid, kinds.index(name) * width + lane, label)
        events += [span(pid, kinds.index(name) * width + lane, f"{name} L{layer}", s, e,
                        batch=batch, layer=layer)
                   for (batch, layer, s, e), lane in zip(spans, lane_of, strict=True)]
    for gpu, changes in sorted(links.items()):
        level = 0
        for t, delta in sorted(changes):
            level += delta
            events.append(counter(gpu, "link transfers in flight", t, transfers=float(level)))
    data = metadata(scenario, shown == gpus, gpus)
    data["tracks"] = "per GPU"
    if shown < gpus:
        data["note"] = f"only the first {shown} of {gpus} GPUs are traced"
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": data}
