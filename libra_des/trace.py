"""Chrome trace-event export (loads in Perfetto and chrome://tracing).

One process per pipeline entity ("rank group"), and per pipeline stage two threads: ``compute``
(forward/backward ops, with their attention breakdown as args) and ``comm`` (pipeline
point-to-point hand-offs and gradient-sync buckets). Times are microseconds; steps follow each
other on one clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from libra_des.sim.pipeline import dependencies
from libra_des.sim.schedules import Schedule
from libra_des.sim.training import StepRecord

US = 1e6


def meta(pid: int, tid: int | None, name: str) -> dict[str, Any]:
    """A process_name / thread_name metadata event."""
    kind = "thread_name" if tid is not None else "process_name"
    event: dict[str, Any] = {"ph": "M", "pid": pid, "name": kind, "args": {"name": name}}
    if tid is not None:
        event["tid"] = tid
    return event


def span(pid: int, tid: int, name: str, t0: float, t1: float, **args: Any) -> dict[str, Any]:
    return {
        "ph": "X", "pid": pid, "tid": tid, "name": name, "cat": name.split()[0],
        "ts": t0 * US, "dur": max(t1 - t0, 0.0) * US, "args": args,
    }


def step_events(
    rec: StepRecord, schedule: Schedule, entities: Iterable[int], offset: float
) -> list[dict[str, Any]]:
    """Spans of one step for the selected entities."""
    deps = dependencies(schedule)
    out = []
    for e in entities:
        for d in range(schedule.stages):
            times = rec.times[d]
            for i, op in enumerate(schedule.orders[d]):
                t0 = offset + float(rec.run.start[e, d, i])
                t1 = offset + float(rec.run.finish[e, d, i])
                name = f"{op.kind} mb{op.microbatch} c{op.chunk}"
                out.append(span(
                    e, 2 * d, name, t0, t1,
                    attention_compute_s=float(times.attn_compute[e, i]),
                    attention_comm_exposed_s=float(times.attn_exposed[e, i]),
                    pool_wait_s=float(times.pool_wait[e, i]),
                ))
                dep = deps[d][i]
                hop = float(rec.p2p_seconds[dep[0], d]) if dep is not None else 0.0
                if dep is not None and dep[0] != d and hop > 0:
                    sent = offset + float(rec.run.finish[e, dep[0], dep[1]])
                    out.append(span(e, 2 * d + 1, f"recv {name}", sent, sent + hop))
            for k, (b0, b1) in enumerate(rec.run.buckets[d]):
                out.append(span(e, 2 * d + 1, f"grad-sync bucket{k}", offset + b0, offset + b1))
    return out


def chrome_trace(
    records: list[StepRecord], schedule: Schedule, entities: list[int] | None = None
) -> dict[str, Any]:
    """The whole trace document for ``records`` (all entities unless a list is given)."""
    count = records[0].plan.pipelines if records else 0
    chosen = [e for e in (entities if entities is not None else range(count)) if e < count]
    events: list[dict[str, Any]] = []
    for e in chosen:
        events.append(meta(e, None, f"rank group {e}"))
        for d in range(schedule.stages):
            events.append(meta(e, 2 * d, f"stage {d} compute"))
            events.append(meta(e, 2 * d + 1, f"stage {d} comm"))
    offset = 0.0
    for rec in records:
        events += step_events(rec, schedule, chosen, offset)
        offset += rec.step_time
    return {"traceEvents": events, "displayTimeUnit": "ms"}
