"""The report's timeline: a per-GPU Gantt chart of one training step or of one MoE layer,
drawn from the run's own ``trace.json`` (the events :mod:`libra_des.results.trace` and
:mod:`libra_des.results.trace_moe` write), so the page and Perfetto show the same spans.

Rows are the trace's tracks (one per GPU compute track, comm track or MoE stage kind; the
first :data:`MAX_TRACKS`), bars its complete (``"X"``) spans, coloured by category. A training
trace holds every step on one clock: only the spans that start within the first step (its
``step_time_s.per_step[0]``) are drawn. An MoE trace: only the first layer's spans
(``args.layer``). matplotlib is imported inside the drawing function.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from libra_des.report.figures import PALETTE, Png, encode

#: Tracks drawn at most (our choice: a readable chart; the caption says how many were left).
MAX_TRACKS = 24
US = 1e6


def track_names(trace: Mapping[str, Any]) -> dict[tuple[int, int], str]:
    """(pid, tid) -> "process / thread" name from the trace's metadata events."""
    procs: dict[int, str] = {}
    threads: dict[tuple[int, int], str] = {}
    for ev in trace.get("traceEvents") or []:
        if ev.get("ph") != "M":
            continue
        name = str((ev.get("args") or {}).get("name", ""))
        if ev.get("name") == "process_name":
            procs[int(ev["pid"])] = name
        elif ev.get("name") == "thread_name":
            threads[(int(ev["pid"]), int(ev["tid"]))] = name
    return {k: f"{procs.get(k[0], f'pid {k[0]}')} / {v}" for k, v in threads.items()}


def first_unit(trace: Mapping[str, Any], result: Mapping[str, Any]
               ) -> tuple[str, list[dict[str, Any]]]:
    """("one training step" or "one MoE layer", the complete spans within it)."""
    spans = [ev for ev in trace.get("traceEvents") or [] if ev.get("ph") == "X"]
    if not spans:
        return "", []
    layers = [(ev.get("args") or {}).get("layer") for ev in spans]
    if any(isinstance(x, int) for x in layers):  # an MoE trace: spans carry args.layer
        first = min((x for x in layers if isinstance(x, int)), default=None)
        return "one MoE layer", [ev for ev, x in zip(spans, layers, strict=True)
                                 if x == first]
    start = min(float(ev["ts"]) for ev in spans)
    per_step = (result.get("step_time_s") or {}).get("per_step") or []
    end = start + float(per_step[0]) * US if per_step else float("inf")
    return "one training step", [ev for ev in spans if float(ev["ts"]) < end]


def gantt(trace: Mapping[str, Any], result: Mapping[str, Any], run: str) -> Png | None:
    """The chart of one step (or MoE layer) of ``run``'s trace; None when it has no span."""
    from matplotlib.figure import Figure

    what, spans = first_unit(trace, result)
    if not spans:
        return None
    names = track_names(trace)
    tracks = sorted({(int(ev["pid"]), int(ev["tid"])) for ev in spans})
    shown, left = tracks[:MAX_TRACKS], max(len(tracks) - MAX_TRACKS, 0)
    row = {t: i for i, t in enumerate(shown)}
    cats = sorted({str(ev.get("cat", "")) for ev in spans})
    colour = {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(cats)}
    t0 = min(float(ev["ts"]) for ev in spans)
    fig = Figure(figsize=(7, 0.9 + 0.28 * len(shown)), layout="constrained")
    ax = fig.subplots()
    for ev in spans:
        key = (int(ev["pid"]), int(ev["tid"]))
        if key in row:
            ax.barh(row[key], float(ev["dur"]) / 1e3, left=(float(ev["ts"]) - t0) / 1e3,
                    height=0.7, color=colour[str(ev.get("cat", ""))])
    ax.set_yticks(range(len(shown)), [names.get(t, f"{t[0]}/{t[1]}") for t in shown],
                  fontsize="x-small")
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    ax.set_title(f"{run}: {what} per GPU track")
    for c in cats[:len(PALETTE)]:
        ax.bar(0, 0, color=colour[c], label=c)
    ax.legend(fontsize="x-small", ncols=min(len(cats), 4), loc="upper right")
    note = f"; {left} more track(s) left out" if left else ""
    return encode(fig, f"Timeline of {run}: {what}, per GPU track, from its trace.json (the "
                       f"spans Perfetto shows){note}.")
