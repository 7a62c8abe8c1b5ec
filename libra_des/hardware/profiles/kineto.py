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
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from libra_des.errors import InputError
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


def events(data: Any, path: Path) -> list[dict[str, Any]]:
    if not isinstance(data, Mapping) or not isinstance(data.get("traceEvents"), list):
        raise InputError("FILE", str(path), "a PyTorch profiler trace (a traceEvents list)")
    return [dict(e) for e in data["traceEvents"] if isinstance(e, Mapping) and e.get("ph") == "X"]


def seconds(event: Mapping[str, Any], where: str) -> float:
    dur = event.get("dur")
    if not isinstance(dur, int | float) or not math.isfinite(dur) or dur <= 0 or dur > 1e10:
        raise InputError(f"{where}.dur", dur, "a positive duration in microseconds")
    return float(dur) * 1e-6


def dtype_of(args: Mapping[str, Any], index: int = 0) -> tuple[str, int] | None:
    types = args.get("Input type") or []
    name = types[index] if isinstance(types, list) and len(types) > index else None
    return DTYPES.get(str(name)) if name is not None else None


def dims(args: Mapping[str, Any]) -> list[list[int]]:
    raw = args.get("Input Dims") or []
    out = []
    for d in raw if isinstance(raw, list) else []:
        ok = isinstance(d, list) and all(isinstance(x, int) and 0 < x < 1 << 40 for x in d)
        out.append(list(d) if ok else [])
    return out


def gemm_sample(ev: Mapping[str, Any], secs: float, source: str) -> Sample | None:
    args, op = ev.get("args") or {}, GEMM_OPS[str(ev["name"])]
    shapes = [d for d in dims(args) if d]
    if ev["name"] == "aten::addmm":
        shapes = shapes[1:]  # bias first
    dt = dtype_of(args, 1 if ev["name"] == "aten::addmm" else 0)
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


def attention_sample(ev: Mapping[str, Any], secs: float, source: str) -> Sample | None:
    args = ev.get("args") or {}
    concrete = args.get("Concrete Inputs") or []
    causal = isinstance(concrete, list) and len(concrete) > 5 and concrete[5] == "True"
    shapes = dims(args)
    if not causal or len(shapes) < 2 or len(shapes[0]) != 4 or len(shapes[1]) != 4:
        return None
    (batch, heads, length, dim), kv = shapes[0], shapes[1]
    shape = AttentionShape(docs=((length, batch),), heads_q=heads, heads_kv=kv[1], head_dim=dim)
    return Sample(op="attention", attention=shape, time=TimeStats(median=secs), source=source)


def gloo_sample(ev: Mapping[str, Any], world: int, secs: float, source: str) -> Sample | None:
    op = _COLL.get(str(ev["name"]).split(":", 1)[1])
    args = ev.get("args") or {}
    shapes, dt = [d for d in dims(args) if d], dtype_of(args)
    if op is None or not shapes or dt is None or world < 2:
        return None
    nbytes = math.prod(shapes[0]) * dt[1] * (world if op == "all_gather" else 1)
    return Sample(op=op, nbytes=float(nbytes), group=world, gpus_per_node=world,
                  time=TimeStats(median=secs), source=source)


def nccl_sample(ev: Mapping[str, Any], per_node: int, secs: float, source: str
                ) -> Sample | None:
    args = ev.get("args") or {}
    name = str(args.get("Collective name") or "")
    op = _COLL.get(name.lower().strip("_"))
    if op is None:
        found = _NCCL_NAME.search(str(ev["name"]))
        op = _CAMEL.get(found.group(1).lower()) if found else None
    group = args.get("Group size")
    size = DTYPES.get(str(args.get("dtype")), ("", 0))[1]
    key = "Out msg nelems" if op == "all_gather" else "In msg nelems"
    nelems = args.get(key)
    if op in (None, "send_recv") or not isinstance(group, int) or group < 2 or not size:
        return None
    if not isinstance(nelems, int) or nelems <= 0:
        return None
    return Sample(op=op, nbytes=float(nelems * size), group=group,
                  gpus_per_node=min(per_node, group), time=TimeStats(median=secs),
                  source=source)


def kernel_seconds(evs: list[dict[str, Any]], ops: list[dict[str, Any]]) -> dict[int, float]:
    """Device seconds per recognised operator (index into ``ops``): each GPU kernel's launcher
    (``External id``) is placed inside the recognised operator enclosing it on its thread."""
    by_ext = {e["args"]["External id"]: e for e in evs
              if e.get("cat") == "cpu_op" and "External id" in (e.get("args") or {})}
    spans: dict[Any, list[tuple[float, float, int]]] = defaultdict(list)
    for i, op in enumerate(ops):
        spans[op.get("tid")].append((float(op["ts"]), float(op["ts"]) + float(op["dur"]), i))
    for v in spans.values():
        v.sort()
    out: dict[int, float] = defaultdict(float)
    for k in (e for e in evs if e.get("cat") == "kernel"):
        launcher = by_ext.get((k.get("args") or {}).get("External id"))
        if launcher is None:
            continue
        row = spans.get(launcher.get("tid"), [])
        j = bisect_right(row, (float(launcher["ts"]), math.inf, 0)) - 1
        if j >= 0 and row[j][1] >= float(launcher["ts"]):
            out[row[j][2]] += float(k.get("dur") or 0) * 1e-6
    return out


def import_kineto(path: Path) -> tuple[tuple[Sample, ...], str | None, int]:
    """(samples, device name or None, operators skipped) of one trace."""
    data = read_json(path, "FILE")
    evs = events(data, path)
    info = data.get("distributedInfo") or {}
    world = int(info.get("world_size") or 1) if isinstance(info, Mapping) else 1
    props = data.get("deviceProperties") or []
    # No GPU in the trace: the operators ran on the host's CPU.
    device = str(props[0].get("name")) if props and isinstance(props[0], Mapping) else "CPU"
    per_node = len(props) if props else world
    source = str(path)
    ops = [e for e in evs if e.get("cat") == "cpu_op"
           and (e.get("name") in GEMM_OPS or e.get("name") == ATTENTION_OP)]
    gpu = kernel_seconds(evs, ops) if any(e.get("cat") == "kernel" for e in evs) else None
    samples: list[Sample] = []
    skipped = 0
    for i, ev in enumerate(ops):
        where = f"{path}: event {ev.get('name')}"
        secs = gpu.get(i, 0.0) if gpu is not None else seconds(ev, where)
        got = None
        if secs > 0:
            fn = attention_sample if ev["name"] == ATTENTION_OP else gemm_sample
            got = fn(ev, secs, source)
        samples += [got] if got else []
        skipped += got is None
    for ev in evs:
        name = str(ev.get("name", ""))
        where = f"{path}: event {name}"
        got = None
        if ev.get("cat") == "kernel" and name.lower().startswith("nccl"):
            got = nccl_sample(ev, per_node, seconds(ev, where), source)
        elif name.startswith("gloo:") and gpu is None:
            got = gloo_sample(ev, world, seconds(ev, where), source)
        samples += [got] if got else []
    if not samples:
        raise InputError("FILE", str(path), "a PyTorch profiler trace (record_shapes=True) "
                         "with GEMM, attention or collective events")
    return tuple(samples), device, skipped
