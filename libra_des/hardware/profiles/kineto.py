"""Read a PyTorch profiler (Kineto) trace into profile samples.

A trace exported by ``torch.profiler.profile(record_shapes=True).export_chrome_trace`` holds
every operator (``cat: cpu_op``) with its input shapes and types, GPU kernels (``cat:
kernel``) tied to the operator that launched them by ``External id``, and collectives: NCCL
kernels carry ``Collective name``, ``In msg nelems``, ``Out msg nelems``, ``Group size`` and
``dtype`` args; gloo runs them on its own thread as ``gloo:<op>`` annotations with the input's
shape, and the group is the trace's ``distributedInfo`` world.

What becomes a sample (assumptions):

- GEMM: ``aten::mm`` / ``aten::addmm`` / ``aten::bmm`` (a batched GEMM is recorded as a
  grouped GEMM of ``batch`` equal experts) with their ``[m, k] x [k, n]`` inputs;
- attention: ``aten::scaled_dot_product_attention`` called with ``is_causal=True`` on
  ``[batch, heads, length, dim]`` inputs (``batch`` documents of ``length``); other calls are
  skipped (the cost model prices causal attention);
- collectives: all_reduce, all_gather, reduce_scatter, all_to_all and broadcast, with
  ``nbytes`` in nccl-tests' ``size`` meaning (the gathered output for all_gather, the input
  otherwise);
- time: with GPU kernels in the trace, the sum of the kernels an operator launched (device
  time); without, the operator's own duration on its CPU thread (gloo: the annotation's).

Every event is typed first (:mod:`kineto_trace`: field paths, types, bounds, known event
types), and every sample is physically plausible: no GEMM or attention call faster than the
peak rate of the trace's GPU record (:func:`check_rate`), no duration of zero or less.
Anything else is one line naming ``FILE: traceEvents[INDEX].FIELD``.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections import defaultdict
from pathlib import Path

from libra_des.errors import InputError
from libra_des.hardware.gpu_records import GpuRecord, device_record
from libra_des.hardware.profiles.kineto_trace import Event, EventArgs, parse_trace
from libra_des.hardware.profiles.profile import (
    AttentionShape,
    GemmShape,
    Sample,
    TimeStats,
    read_json,
)

GEMM_OPS = {"aten::mm": "gemm", "aten::addmm": "gemm", "aten::bmm": "grouped_gemm"}
ATTENTION_OP = "aten::scaled_dot_product_attention"
#: Kineto's ``Input type`` strings -> profile dtypes and element sizes.
DTYPES = {"float": ("fp32", 4), "c10::BFloat16": ("bf16", 2), "c10::Half": ("fp16", 2),
          "double": ("fp32", 8), "Float": ("fp32", 4), "BFloat16": ("bf16", 2),
          "Half": ("fp16", 2)}
_COLL = {"allreduce": "all_reduce", "all_reduce": "all_reduce", "allgather": "all_gather",
         "all_gather": "all_gather", "_allgather_base": "all_gather",
         "all_gather_into_tensor": "all_gather", "reduce_scatter": "reduce_scatter",
         "_reduce_scatter_base": "reduce_scatter", "reduce_scatter_tensor": "reduce_scatter",
         "reducescatter": "reduce_scatter", "all_to_all": "all_to_all",
         "alltoall": "all_to_all", "alltoall_base": "all_to_all", "all_to_allv": "all_to_all",
         "broadcast": "broadcast"}
_NCCL_NAME = re.compile(r"nccl(?:Dev)?Kernel_(\w+?)_", re.IGNORECASE)
_CAMEL = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
          "alltoall": "all_to_all", "broadcast": "broadcast", "sendrecv": "send_recv"}
#: Largest collective message accepted (the importers' 1 TiB bound).
MAX_BYTES = float(1 << 40)


def where_of(path: Path, ev: Event, field: str = "dur") -> str:
    return f"{path}: traceEvents[{ev.index}].{field}"


def seconds(ev: Event, path: Path) -> float:
    """An event's duration; a measured case needs a positive one."""
    if ev.dur <= 0:
        raise InputError(where_of(path, ev), ev.dur, "a positive duration in microseconds")
    return ev.dur * 1e-6


def dtype_of(args: EventArgs, index: int = 0) -> tuple[str, int] | None:
    types = args.input_type
    name = types[index] if len(types) > index else None
    return DTYPES.get(str(name)) if isinstance(name, str) else None


def dims(args: EventArgs) -> list[list[int]]:
    """Each input's sizes; an input that is no plain tensor (a list, a scalar) as ``[]``."""
    return [list(d) if d and all(isinstance(x, int) and x > 0 for x in d) else []
            for d in args.input_dims]


def gemm_sample(ev: Event, secs: float, source: str) -> Sample | None:
    op = GEMM_OPS[ev.name]
    shapes = [d for d in dims(ev.args) if d]
    if ev.name == "aten::addmm":
        shapes = shapes[1:]  # bias first
    dt = dtype_of(ev.args, 1 if ev.name == "aten::addmm" else 0)
    if len(shapes) < 2 or dt is None:
        return None
    a, b = shapes[0], shapes[1]
    if op == "gemm" and len(a) == 2 and len(b) == 2 and a[1] == b[0]:
        shape = GemmShape(m=a[0], n=b[1], k=a[1], dtype=dt[0])
        return Sample(op="gemm", gemm=shape, time=TimeStats(median=secs), source=source)
    if op == "grouped_gemm" and len(a) == 3 and len(b) == 3 and a[2] == b[1]:
        shape = GemmShape(m=a[1], n=b[2], k=a[2], dtype=dt[0])
        return Sample(op="grouped_gemm", gemm=shape, group=a[0], time=TimeStats(median=secs),
                      source=source)
    return None


def attention_sample(ev: Event, secs: float, source: str) -> Sample | None:
    concrete = ev.args.concrete_inputs
    causal = len(concrete) > 5 and concrete[5] == "True"
    shapes = dims(ev.args)
    if not causal or len(shapes) < 2 or len(shapes[0]) != 4 or len(shapes[1]) != 4:
        return None
    (batch, heads, length, dim), kv = shapes[0], shapes[1]
    shape = AttentionShape(docs=((length, batch),), heads_q=heads, heads_kv=kv[1], head_dim=dim)
    return Sample(op="attention", attention=shape, time=TimeStats(median=secs), source=source)


def message(ev: Event, path: Path, nbytes: int) -> float:
    """A collective's size, within the importers' bound."""
    if nbytes > MAX_BYTES:
        raise InputError(where_of(path, ev, "args"), nbytes,
                         f"a message of at most {MAX_BYTES:.0f} bytes")
    return float(nbytes)


def gloo_sample(ev: Event, world: int, path: Path) -> Sample | None:
    op = _COLL.get(ev.name.split(":", 1)[1])
    shapes, dt = [d for d in dims(ev.args) if d], dtype_of(ev.args)
    if op is None or not shapes or dt is None or world < 2:
        return None
    nbytes = math.prod(shapes[0]) * dt[1] * (world if op == "all_gather" else 1)
    return Sample(op=op, nbytes=message(ev, path, nbytes), group=world, gpus_per_node=world,
                  time=TimeStats(median=seconds(ev, path)), source=str(path))


def nccl_sample(ev: Event, per_node: int, path: Path) -> Sample | None:
    args = ev.args
    op = _COLL.get((args.collective_name or "").lower().strip("_"))
    if op is None:
        found = _NCCL_NAME.search(ev.name)
        op = _CAMEL.get(found.group(1).lower()) if found else None
    group = args.group_size
    size = DTYPES.get(str(args.dtype), ("", 0))[1]
    nelems = args.out_nelems if op == "all_gather" else args.in_nelems
    if op in (None, "send_recv") or group is None or group < 2 or not size or not nelems:
        return None
    return Sample(op=op, nbytes=message(ev, path, nelems * size), group=group,
                  gpus_per_node=min(per_node, group), time=TimeStats(median=seconds(ev, path)),
                  source=str(path))


def kernel_seconds(evs: list[Event], ops: list[Event]) -> dict[int, float]:
    """Device seconds per recognised operator (index into ``ops``): each GPU kernel's launcher
    (``External id``) is placed inside the recognised operator enclosing it on its thread."""
    by_ext = {e.args.external_id: e for e in evs
              if e.cat == "cpu_op" and e.args.external_id is not None}
    spans: dict[int | str, list[tuple[float, float, int]]] = defaultdict(list)
    for i, op in enumerate(ops):
        spans[op.tid].append((op.ts, op.ts + op.dur, i))
    for v in spans.values():
        v.sort()
    out: dict[int, float] = defaultdict(float)
    for k in (e for e in evs if e.cat == "kernel"):
        launcher = by_ext.get(k.args.external_id) if k.args.external_id is not None else None
        if launcher is None:
            continue
        row = spans.get(launcher.tid, [])
        j = bisect_right(row, (launcher.ts, math.inf, 0)) - 1
        if j >= 0 and row[j][1] >= launcher.ts:
            out[row[j][2]] += k.dur * 1e-6
    return out


#: Slack on a datasheet peak before a measured rate is refused (our choice: timestamps are
#: rounded and boost clocks run a few percent above the datasheet's).
PEAK_SLACK = 1.1


def peak_flops(record: GpuRecord, dtype: str | None) -> float:
    """The record's dense peak for ``dtype`` (fp32 through TF32 where the part has it);
    for no dtype (attention), the fastest 16-bit or wider path."""
    rates = {"bf16": record.bf16_flops.value, "fp16": record.fp16_flops.value,
             "fp32": max(record.fp32_flops.value,
                         record.tf32_flops.value if record.tf32_flops else 0.0)}
    return rates.get(dtype or "", max(rates.values()))


def sample_flops(s: Sample) -> float:
    """FLOPs of a GEMM (``2mnk`` per expert) or causal attention call (``2 L^2 h d`` per
    document: two matmuls over half the score matrix)."""
    if s.gemm is not None:
        return 2.0 * s.gemm.m * s.gemm.n * s.gemm.k * s.group
    if s.attention is not None:
        a = s.attention
        return sum(2.0 * length * length * a.heads_q * a.head_dim * count
                   for length, count in a.docs)
    return 0.0


def check_rate(s: Sample, ev: Event, record: GpuRecord, path: Path) -> None:
    """Refuse a sample faster than its device's peak (a mis-recorded or edited duration)."""
    peak = peak_flops(record, s.gemm.dtype if s.gemm else None)
    flops = sample_flops(s)
    if flops > peak * PEAK_SLACK * s.time.median:
        raise InputError(where_of(path, ev), f"{s.time.median * 1e6:.6g} us",
                         f"a time at or above {flops / peak * 1e6:.4g} us: {ev.name} of "
                         f"{flops:.4g} FLOP at {record.name}'s peak {peak / 1e12:,.0f} TFLOP/s")


def operator_samples(evs: list[Event], record: GpuRecord, path: Path
                     ) -> tuple[list[Sample], int]:
    """GEMM and attention samples (checked against ``record``), and how many were skipped."""
    ops = [e for e in evs if e.cat == "cpu_op" and (e.name in GEMM_OPS or e.name == ATTENTION_OP)]
    gpu = kernel_seconds(evs, ops) if any(e.cat == "kernel" for e in evs) else None
    samples: list[Sample] = []
    for i, ev in enumerate(ops):
        secs = gpu.get(i, 0.0) if gpu is not None else seconds(ev, path)
        fn = attention_sample if ev.name == ATTENTION_OP else gemm_sample
        got = fn(ev, secs, str(path)) if secs > 0 else None
        if got is not None:
            check_rate(got, ev, record, path)
            samples.append(got)
    return samples, len(ops) - len(samples)


def import_kineto(path: Path) -> tuple[tuple[Sample, ...], str | None, int]:
    """(samples, device name or None, operators skipped) of one trace."""
    trace, evs = parse_trace(read_json(path, "FILE"), path)
    world = trace.distributedInfo.world_size if trace.distributedInfo else 1
    props = trace.deviceProperties
    # No GPU in the trace: the operators ran on the host's CPU.
    device = props[0].name if props else "CPU"
    per_node = len(props) if props else world
    has_gpu = any(e.cat == "kernel" for e in evs)
    samples, skipped = operator_samples(evs, device_record(device), path)
    for ev in evs:
        got = None
        if ev.cat == "kernel" and ev.name.lower().startswith("nccl"):
            got = nccl_sample(ev, per_node, path)
        elif ev.name.startswith("gloo:") and not has_gpu:
            got = gloo_sample(ev, world, path)
        samples += [got] if got else []
    if not samples:
        raise InputError("FILE", str(path), "a PyTorch profiler trace (record_shapes=True) "
                         "with GEMM, attention or collective events")
    return tuple(samples), device, skipped
