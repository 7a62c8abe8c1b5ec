"""Chrome trace-event export of training runs (loads in Perfetto and chrome://tracing).

Tracks. One process per pipeline entity ("rank group"). Up to :data:`GPU_TRACK_LIMIT` traced
GPUs, every GPU gets its own compute track (thread) per pipeline stage; above it, one compute
track per (entity, stage) stands for all its GPUs, and ``otherData.note`` says so. Entities
run in lockstep (``docs/architecture.md``), so every GPU of an (entity, stage) shows the same
op spans; the args carry the per-GPU means (attention compute, exposed exchange, pool wait).
GPU ranks follow the simulator's placement: stage-major, ``rank = stage * dp * cp + entity *
width + k`` (``sim/training.p2p_times``).

Each stage also has a ``comm`` track: pipeline hand-offs (``recv``) and gradient-sync buckets.
A flow arrow joins each hand-off's send (the end of the producing op on the sender's compute
track) to its receive. Counter tracks per entity: point-to-point bytes in flight, microbatch
activations held per stage and their memory per GPU counting layer inputs only (a lower
bound: the stored intermediate tensors of a layer are not modelled).

Times are microseconds; steps follow each other on one clock. ``otherData`` holds the
scenario name, seed, fidelity, policy, package version and code fingerprint.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from libra_des.base.identity import code_fingerprint
from libra_des.base.version import __version__
from libra_des.config import ScenarioBase
from libra_des.config import TrainingScenario as Scenario
from libra_des.sim.training.pipeline import dependencies
from libra_des.sim.training.schedules import Schedule
from libra_des.sim.training.simulator import StepRecord

US = 1e6
#: Per-GPU tracks up to this many traced GPUs (our choice: one Libra pool group of the
#: quickstart, 8 replicas x CP 8 x PP 4; Perfetto stays responsive and a
#: trace stays within tens of MB); above it, one track per rank group.
GPU_TRACK_LIMIT = 256
#: How far before the end of a producing op a flow arrow starts (so it binds to that op).
FLOW_LEAD_US = 1e-3


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


def counter(pid: int, name: str, t: float, **values: float) -> dict[str, Any]:
    return {"ph": "C", "pid": pid, "name": name, "ts": t * US, "args": values}


def flow(fid: int, start: tuple[int, int, float], end: tuple[int, int, float]) -> list[Any]:
    """A flow arrow from (pid, tid, t) to (pid, tid, t); the end binds to the enclosing span."""
    (p0, t0, s), (p1, t1, f) = start, end
    common = {"name": "p2p", "cat": "p2p", "id": fid}
    return [{**common, "ph": "s", "pid": p0, "tid": t0, "ts": s * US - FLOW_LEAD_US},
            {**common, "ph": "f", "bp": "e", "pid": p1, "tid": t1, "ts": f * US}]


@dataclass(frozen=True)
class Tracks:
    """Which tracks exist: ``width`` GPUs per (entity, stage), shown one by one or grouped."""

    stages: int
    width: int
    stride: int  # GPUs per stage (dp * cp)
    per_gpu: bool
    cp: int = 1  # context-parallel width (expert gradients reduce over stride / cp)

    def compute(self, d: int) -> list[int]:
        """Thread ids of stage ``d``'s compute tracks."""
        count = self.width if self.per_gpu else 1
        return [d * (count + 1) + k for k in range(count)]

    def comm(self, d: int) -> int:
        return d * ((self.width if self.per_gpu else 1) + 1) + (self.width if self.per_gpu
                                                                  else 1)

    def names(self, e: int) -> list[dict[str, Any]]:
        out = []
        for d in range(self.stages):
            for k, tid in enumerate(self.compute(d)):
                rank = d * self.stride + e * self.width + k
                label = f"stage {d} GPU {rank}" if self.per_gpu else (
                    f"stage {d} compute (GPUs {d * self.stride + e * self.width}-"
                    f"{d * self.stride + (e + 1) * self.width - 1})")
                out.append(meta(e, tid, label))
            out.append(meta(e, self.comm(d), f"stage {d} comm"))
        return out


def step_events(
    rec: StepRecord, schedule: Schedule, entities: Iterable[int], offset: float,
    tracks: Tracks, next_flow: int = 0,
) -> list[dict[str, Any]]:
    """Spans, flows and counters of one step for the selected entities."""
    deps = dependencies(schedule)
    out: list[dict[str, Any]] = []
    fid = next_flow
    for e in entities:
        transfers: list[tuple[float, float]] = []
        for d in range(schedule.stages):
            times = rec.times[d]
            for i, op in enumerate(schedule.orders[d]):
                t0 = offset + float(rec.run.start[e, d, i])
                t1 = offset + float(rec.run.finish[e, d, i])
                name = f"{op.kind} mb{op.microbatch} c{op.chunk}"
                args = {"attention_compute_s": float(times.attn_compute[e, i]),
                        "attention_comm_exposed_s": float(times.attn_exposed[e, i]),
                        "pool_wait_s": float(times.pool_wait[e, i])}
                out += [span(e, tid, name, t0, t1, **args) for tid in tracks.compute(d)]
                dep = deps[d][i]
                hop = float(rec.p2p_seconds[dep[0], d]) if dep is not None else 0.0
                if dep is not None and dep[0] != d and hop > 0:
                    sent = offset + float(rec.run.finish[e, dep[0], dep[1]])
                    out.append(span(e, tracks.comm(d), f"recv {name}", sent, sent + hop,
                                    bytes=rec.linear.act_bytes, src_stage=dep[0]))
                    out += flow(fid, (e, tracks.compute(dep[0])[0], sent),
                                (e, tracks.comm(d), sent))
                    fid += 1
                    transfers.append((sent, sent + hop))
            for k, (b0, b1) in enumerate(rec.run.buckets[d]):
                out.append(span(e, tracks.comm(d), f"grad-sync bucket{k}", offset + b0,
                                offset + b1, **bucket_args(rec, tracks)))
        out += in_flight(e, transfers, rec.linear.act_bytes * tracks.width)
        out += activations_held(e, rec, schedule, offset)
    return out


def bucket_args(rec: StepRecord, tracks: Tracks) -> dict[str, float]:
    """What one layer's gradient bucket reduces per GPU: replicated weights over DP x CP
    (``group``), this GPU's experts over DP (``expert_group``; see ``sync_fn``)."""
    return {"bytes": rec.linear.grad_bytes, "group": tracks.stride,
            "expert_bytes": rec.linear.expert_grad_bytes,
            "expert_group": tracks.stride // tracks.cp}


def in_flight(pid: int, transfers: list[tuple[float, float]], nbytes: float) -> list[Any]:
    """Counter: point-to-point bytes on the wire for this entity over time."""
    changes = sorted([(t0, nbytes) for t0, _ in transfers] + [(t1, -nbytes) for _, t1 in
                                                              transfers])
    level, out = 0.0, []
    for t, delta in changes:
        level = max(level + delta, 0.0)
        out.append(counter(pid, "p2p bytes in flight", t, bytes=level))
    return out


def activations_held(pid: int, rec: StepRecord, schedule: Schedule, offset: float
                     ) -> list[Any]:
    """Counters: microbatches whose activations a stage holds (forward done, backward not)
    and their memory per GPU counting layer inputs only."""
    per_layer = rec.linear.act_bytes
    layers = float(np.max(rec.times[0].layers)) if rec.times else 0.0
    events: list[tuple[float, int, int]] = []
    for d in range(schedule.stages):
        for i, op in enumerate(schedule.orders[d]):
            end = offset + float(rec.run.finish[pid, d, i])
            events.append((end, d, 1 if op.kind == "F" else -1))
    held = [0] * schedule.stages
    out = []
    for t, d, delta in sorted(events):
        held[d] = max(held[d] + delta, 0)
        out.append(counter(pid, "activations held (microbatches)", t,
                           **{f"stage {s}": float(h) for s, h in enumerate(held)}))
        out.append(counter(pid, "activation memory per GPU, layer inputs only (bytes)", t,
                           **{f"stage {s}": h * per_layer * layers for s, h in enumerate(held)}))
    return out


def metadata(scenario: ScenarioBase | None, per_gpu: bool, gpus: int) -> dict[str, Any]:
    data: dict[str, Any] = {"libra_des": __version__, "code": code_fingerprint(),
                            "tracks": "per GPU" if per_gpu else "per rank group",
                            "traced_gpus": gpus}
    if not per_gpu:
        data["note"] = (f"{gpus} traced GPUs exceed the per-GPU track limit of "
                        f"{GPU_TRACK_LIMIT}: one compute track per rank group and stage "
                        f"(its GPUs run in lockstep); --trace-ranks selects fewer groups")
    if scenario is not None:
        data.update(scenario.tags())
    return data


def chrome_trace(
    records: list[StepRecord], schedule: Schedule, entities: list[int] | None = None,
    scenario: Scenario | None = None,
) -> dict[str, Any]:
    """The whole trace document for ``records`` (all entities unless a list is given)."""
    count = records[0].plan.pipelines if records else 0
    chosen = [e for e in (entities if entities is not None else range(count)) if e < count]
    par = scenario.parallelism if scenario is not None else None
    stride = par.dp * par.cp if par is not None else count
    width = max(stride // max(count, 1), 1)
    traced = len(chosen) * schedule.stages * width
    tracks = Tracks(schedule.stages, width, stride, traced <= GPU_TRACK_LIMIT,
                    par.cp if par is not None else 1)
    events: list[dict[str, Any]] = []
    for e in chosen:
        events.append(meta(e, None, f"rank group {e}"))
        events += tracks.names(e)
    offset = 0.0
    for rec in records:
        flows = sum(1 for ev in events if ev["ph"] == "s")
        events += step_events(rec, schedule, chosen, offset, tracks, flows)
        offset += rec.step_time
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": metadata(scenario, tracks.per_gpu, traced)}
