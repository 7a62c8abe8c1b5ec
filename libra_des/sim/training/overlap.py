"""Where a training step overlaps compute with communication, and what interference costs.

The model is :mod:`libra_des.hardware.compute.interference`; this module applies it at the three
overlap points of a training step (``overlap.interference: on``; ``off`` leaves every
duration untouched, so results are bit for bit the free-overlap ones):

* **The Pipeliner's hidden exchange** (TAP's remote K/V dispatch, the Q/O return, and their
  backward and recomputed counterparts): each compute chunk runs beside the transfers of its
  neighbours, ``(M - 1) / M`` of a chunk's dispatch plus return on average (chunk 0 has no
  return beside it, the last no dispatch). The chunk is stretched before the Pipeliner's
  makespan is taken (``stagetimes``). Channels: NCCL runs point-to-point on the
  communicator's channels rounded up to a power of two (``ncclTopoComputeP2pChannels``),
  so the ring-search channel count of the pool's layout from NCCL's tuner.
* **Gradient all-reduce buckets** beside the backward: every bucket that runs before the
  stage's last backward finishes takes SMs from it; the backward's deficit pushes the later
  buckets' readiness back (one pass: deficits accrued before a bucket is ready delay it).
  Channels: NCCL's tuner's launched channels for the bucket.
* **Pipeline hand-offs**: a stage sends its activation (or gradient) while it computes its
  next op; that op is stretched by the send beside it (sender side only; the receiver's copy
  lands while it waits, our assumption). Fast fidelity only (detailed replays hand-offs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from libra_des.hardware.compute.interference import (
    OverlapModel,
    p2p_channels,
    port_share,
    stretched_chunk,
)
from libra_des.hardware.costs import CostModel
from libra_des.sim.training.schedules import Schedule


@dataclass(frozen=True)
class Factors:
    """(kernel, collective) slowdowns of one overlap point while both run."""

    kernel: float
    comm: float


@dataclass
class Ledger:
    """Seconds interference added in one step (filled while the step is costed)."""

    compute_s: float = 0.0  # per-GPU mean compute slowdown, summed over the step's ops
    comm_s: float = 0.0  # per-GPU mean collective slowdown
    by_point: dict[str, float] = field(default_factory=dict)

    def add(self, point: str, compute: float, comm: float = 0.0) -> None:
        self.compute_s += compute
        self.comm_s += comm
        self.by_point[point] = self.by_point.get(point, 0.0) + compute + comm


def exchange_factors(model: OverlapModel, cost: CostModel, workers: int) -> Factors:
    """Attention beside the Pipeliner's exchange."""
    k, c = model.factors(p2p_channels(cost, workers), port_share(model, cost))
    return Factors(k, c)


def pipeliner_stretch(c: np.ndarray, d: np.ndarray, r: np.ndarray, m: int,
                      f: Factors) -> tuple[np.ndarray, np.ndarray]:
    """(compute seconds added, transfer seconds added) per chunk of the Pipeliner's
    schedule: ``c`` per chunk ``[..., W]``, ``d`` and ``r`` per chunk ``[..., 1]``."""
    beside = (d + r) * ((m - 1) / m)
    return stretched_chunk(c, beside, f.kernel, f.comm)


def handoff_durations(durations: list[np.ndarray], schedule: Schedule, p2p: np.ndarray,
                      f: Factors, ledger: Ledger) -> list[np.ndarray]:
    """Op durations with each op stretched by the hand-off its device sends beside it."""
    out = []
    for d, dur in enumerate(durations):
        beside = np.zeros(dur.shape[1])
        order = schedule.orders[d]
        for i in range(1, len(order)):
            dst = consumer_device(schedule, d, order[i - 1])
            if dst is not None and dst != d:
                beside[i] = p2p[d, dst]
        added, extra = stretched_chunk(dur, beside[None, :], f.kernel, f.comm)
        new = dur + added
        ledger.add("pipeline_handoff", float(added.sum()) / dur.shape[0],
                   float(extra.sum()) / dur.shape[0])
        out.append(new)
    return out


def consumer_device(schedule: Schedule, device: int, op: object) -> int | None:
    """Device of the virtual stage that consumes ``op``'s output (None: nobody)."""
    vs = schedule.virtual_stage(device, op)  # type: ignore[arg-type]
    nxt = vs + 1 if getattr(op, "kind", "F") == "F" else vs - 1
    if nxt < 0 or nxt > schedule.last_virtual:
        return None
    return schedule.device_of(nxt)[0]


def stretched_buckets(ready: list[float], bucket_s: float, compute_end: float, f: Factors,
                      ledger: Ledger) -> tuple[list[tuple[float, float]], float]:
    """Gradient buckets beside the backward (module docstring): the backward's deficit from
    the buckets that ran before a bucket is ready delays that bucket; one pass."""
    first, _ = bucket_times(sorted(ready), bucket_s)
    loss = 1.0 - 1.0 / f.kernel

    def deficit(t: float) -> float:
        stop = min(t, compute_end)
        return loss * sum(max(0.0, min(b, stop) - a) for a, b in first)

    shifted = sorted(r + deficit(r) for r in ready)
    buckets, end = bucket_times(shifted, bucket_s)
    ledger.add("gradient_sync", deficit(compute_end))
    return buckets, end


def bucket_times(ready: list[float], bucket_s: float) -> tuple[list[tuple[float, float]], float]:
    """Buckets one after another on the communication stream, each once it is ready."""
    buckets, t = [], 0.0
    for r in ready:
        t = max(t, r) + bucket_s
        buckets.append((t - bucket_s, t))
    return buckets, t
