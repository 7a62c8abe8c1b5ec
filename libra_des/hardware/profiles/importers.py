"""Read other tools' measurements into profile samples.

- ``nccl-tests``: raw ``*_perf`` output. The op comes from the command line (``all_reduce_perf``)
  or else the file name; the group size from the ``Rank`` lines, else ``nGpus`` (times
  ``nThread``), else ``-g``; GPUs per node from the distinct hosts of the ``Rank`` lines. The
  out-of-place time (µs) is used.
- ``vidur-csv``: Vidur's network profiling CSVs (times in ms, ``size`` in bytes,
  ``num_workers``, ``devices_per_node``, the op in ``collective``).
- ``attention-psv``: the pipe-separated FlashAttention varlen table (one row per call;
  ``batch`` lists the document lengths as ``[32] * (1024)`` or ``[100, 200]``, parsed without
  ``eval``); heads per call are ``hqo/tp`` query and ``max(hkv/tp, 1)`` KV heads.
- ``grouped-gemm-csv``: public grouped-GEMM measurements (``calibration/public/``): ``#``
  comment lines naming the source, then ``device, dtype, layout, groups, rows, n, k, tflops,
  time_us``; ``rows`` is one count for every group or ``;``-separated counts per expert; the
  time is ``time_us``, else derived from the reported TFLOPS (``2 * sum(rows) * n * k``).

Each importer returns the samples and, when the file says, the device name.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from libra_des.errors import InputError
from libra_des.hardware.profiles import import_checks as checks
from libra_des.hardware.profiles.kineto import import_kineto
from libra_des.hardware.profiles.profile import (
    COLLECTIVE_OPS,
    AttentionShape,
    GemmShape,
    Sample,
    TimeStats,
    read_text,
)

FORMATS = ("nccl-tests", "vidur-csv", "attention-psv", "grouped-gemm-csv", "kineto")


@dataclass(frozen=True)
class Imported:
    samples: tuple[Sample, ...]
    device: str | None
    skipped: int = 0  # rows without a measurement (size 0), reported by the command


def read_file(path: Path) -> str:
    return read_text(path, "FILE", "text file")


def import_files(fmt: str, paths: list[Path]) -> Imported:
    """Import ``paths`` in format ``fmt``; the first device name found wins."""
    readers: dict[str, Callable[[Path], Imported]] = {
        "nccl-tests": import_nccl_tests,
        "vidur-csv": import_vidur_csv,
        "attention-psv": import_attention_psv,
        "grouped-gemm-csv": import_grouped_gemm_csv,
        "kineto": lambda p: Imported(*import_kineto(p)),
    }
    if fmt not in readers:
        raise InputError("format", fmt, " | ".join(FORMATS))
    parts = [readers[fmt](p) for p in paths]
    device = next((p.device for p in parts if p.device), None)
    skipped = sum(p.skipped for p in parts)
    return Imported(tuple(s for p in parts for s in p.samples), device, skipped)


# ----------------------------------------------------------------------------- nccl-tests

_BINARY = re.compile(r"(\w+?)_perf\b")
_NGPUS = re.compile(r"nThread\s+(\d+)\s+nGpus\s+(\d+)")
_G_FLAG = re.compile(r"\s-g\s+(\d+)")
_RANK = re.compile(
    r"#\s*Rank\s+(?P<rank>\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+.*?(NVIDIA.*)?$"
)


_ALIASES = {"sendrecv": "send_recv", "alltoall": "all_to_all"}


def nccl_op(text: str, path: Path) -> str:
    """The op from the ``*_perf`` binary on the command line, else from the file name."""
    first = text.splitlines()[0] if text else ""
    binary = _BINARY.search(first)
    if binary:
        op = _ALIASES.get(binary.group(1), binary.group(1))
        if op in COLLECTIVE_OPS:
            return op
    named = [op for op in COLLECTIVE_OPS if op in path.name]
    if named:
        return named[0]
    raise InputError("FILE", str(path), "nccl-tests output naming its op (e.g. all_reduce_perf)")


def nccl_layout(text: str, path: Path) -> tuple[int, int, str | None]:
    """(ranks, ranks per node, device) from the header of one nccl-tests log.

    Rank lines count once per rank number (a pasted-twice header is one rank each); a header
    cut to fewer Rank lines than its ``nThread x nGpus`` says takes the larger count (one
    process drives that many GPUs on its node)."""
    found = [m for m in (_RANK.match(line.strip()) for line in text.splitlines()) if m]
    ranks = {m.group("rank"): m for m in found}
    device = next((m.group(3).strip() for m in found if m.group(3)), None)
    header = _NGPUS.search(text)
    local = int(header.group(1)) * int(header.group(2)) if header else 0
    if ranks:
        hosts = {m.group(2) for m in ranks.values()}
        n = max(len(ranks), local)
        return n, max(n // len(hosts), 1), device
    if header:
        return local, local, device
    flag = _G_FLAG.search(text)
    if flag:
        return int(flag.group(1)), int(flag.group(1)), device
    raise InputError("FILE", str(path), "nccl-tests output with Rank lines or an nGpus header")


def nccl_time_column(text: str, path: Path) -> int:
    """Index of the out-of-place ``time`` column in the table header."""
    for line in text.splitlines():
        cols = line.lstrip("#").split()
        if "size" in cols and "time" in cols:
            return cols.index("time")
    raise InputError("FILE", str(path), "nccl-tests output with a size ... time header")


def import_nccl_tests(path: Path) -> Imported:
    text = read_file(path)
    op = nccl_op(text, path)
    ranks, per_node, device = nccl_layout(text, path)
    checks.group_size(ranks, f"{path}: ranks")
    if ranks < 2:
        # A one-GPU collective moves no data: its times hold nothing to fit a link with.
        raise InputError(f"{path}: ranks", ranks, "a collective over 2 or more GPUs")
    checks.group_size(per_node, f"{path}: ranks per node")
    header = checks.nccl_header(text, path)
    samples, skipped = [], 0
    for lineno, line in enumerate(text.splitlines(), start=1):
        cols = line.split()
        if not cols or not cols[0][:1].isdigit():
            continue
        row = checks.nccl_row(cols, header, f"{path}:{lineno}")
        if row is None:
            skipped += 1
            continue
        size, micros = row
        samples.append(
            Sample(
                op=op,
                nbytes=size,
                group=ranks,
                gpus_per_node=per_node,
                time=TimeStats(median=micros * 1e-6),
                source=str(path),
            )
        )
    if not samples:
        raise InputError("FILE", str(path), "nccl-tests output with at least one result row")
    return Imported(tuple(samples), device, skipped)


# ----------------------------------------------------------------------------- vidur

_VIDUR_DEVICE = re.compile(r"(a100|h100|h200|a40|l40s?)", re.IGNORECASE)


def vidur_row(row: dict[str, str], path: Path, line: int) -> Sample | None:
    """One Vidur row as a sample; None for a row of size 0 (no measurement)."""
    op = row.get("collective", "")
    where = f"{path}:{line}"
    if op not in COLLECTIVE_OPS:
        raise InputError(where, op, " | ".join(COLLECTIVE_OPS))
    try:
        stats = {
            k: checks.number(row[f"time_stats.{op}.{k}"], where, f"{k} time (ms)",
                             checks.MAX_SECONDS * 1e3, positive=k != "std") * 1e-3
            for k in ("median", "mean", "min", "max", "std")
        }
        size = checks.number(row["size"], where, "size (bytes)", checks.MAX_BYTES, False)
        workers = checks.count(row["num_workers"], where, "num_workers", checks.MAX_GPUS)
        per_node = checks.count(row["devices_per_node"], where, "devices_per_node",
                                checks.MAX_GPUS)
    except KeyError as exc:
        raise InputError(
            where, str(exc), "Vidur profiling columns (time_stats.OP.*, size, ...)"
        ) from None
    if size == 0:
        return None
    return Sample(
        op=op,
        nbytes=size,
        group=workers,
        gpus_per_node=min(per_node, workers),
        time=TimeStats(**stats),
        source=str(path),
    )


def import_vidur_csv(path: Path) -> Imported:
    text = read_file(path)
    rows = list(csv.DictReader(text.splitlines()))
    if not rows or "collective" not in rows[0]:
        raise InputError("FILE", str(path), "a Vidur profiling CSV with a 'collective' column")
    samples = []
    for i, row in enumerate(rows, start=2):
        s = vidur_row(row, path, i)
        if s is not None:
            samples.append(s)
    device = _VIDUR_DEVICE.search(path.name)
    return Imported(tuple(samples), device.group(1).upper() if device else None,
                    len(rows) - len(samples))


# ----------------------------------------------------------------------------- attention

_TERM = re.compile(r"^\[\s*(\d+(?:\s*,\s*\d+)*)?\s*\]\s*(?:\*\s*\(?\s*(\d+)\s*\)?)?$")


def parse_batch(text: str, where: str) -> tuple[tuple[int, int], ...]:
    """``[32] * (1024)`` -> ((32, 1024),); ``[1, 2] + [3] * 2`` -> ((1,1),(2,1),(3,2))."""
    runs: dict[int, int] = {}
    for term in text.split("+"):
        match = _TERM.match(term.strip())
        if not match or match.group(1) is None:
            raise InputError(where, text, "a list like [32] * (1024) or [100, 200] (+ ...)")
        repeat = checks.count(match.group(2) or "1", where, "a repeat count", checks.MAX_TOKENS)
        for length in (checks.count(x, where, "a document length", checks.MAX_TOKENS)
                       for x in match.group(1).split(",")):
            runs[length] = runs.get(length, 0) + repeat
    return tuple(sorted(runs.items()))


def psv_row(row: dict[str, str], path: Path, line: int) -> Sample:
    where = f"{path}:{line}"
    if None in row or None in row.values():
        # csv keeps extra cells under None and fills missing ones with None: a row whose
        # cells do not match the header (a pasted NaN column, a cut line) is refused.
        cells = [*(v for k, v in row.items() if k is not None), *(row.get(None) or [])]  # type: ignore[call-overload]
        raise InputError(where, "|".join(str(c) for c in cells),
                         f"a complete row of {len(row) - (None in row)} columns, as the header")
    try:
        tp, cp = (checks.count(row[k], where, k, 4096) for k in ("tp", "cp"))
        hqo, hkv, dim = (checks.count(row[k], where, k, 4096) for k in ("hqo", "hkv", "d"))
        total = checks.count(row["total_len"], where, "total_len", 1 << 40)
        millis = checks.number(row["total_latency(ms)"], where, "total_latency(ms)",
                               checks.MAX_SECONDS * 1e3)
    except KeyError as exc:
        raise InputError(
            where, str(exc), "tp, cp, hqo, hkv, d, total_len, total_latency(ms)"
        ) from None
    docs = parse_batch(row.get("batch", ""), where)
    if sum(length * count for length, count in docs) != total:
        raise InputError(where, row.get("batch"), f"document lengths summing to total_len={total}")
    if tp <= 0 or hqo % tp or millis <= 0:
        raise InputError(where, f"tp={tp} hqo={hqo}", "tp dividing hqo and a positive latency")
    shape = AttentionShape(
        docs=docs, heads_q=hqo // tp, heads_kv=max(hkv // tp, 1), head_dim=dim, cp=cp
    )
    return Sample(
        op="attention", attention=shape, time=TimeStats(median=millis * 1e-3), source=str(path)
    )


def import_attention_psv(path: Path) -> Imported:
    lines = [line for line in read_file(path).splitlines() if line.strip()]
    rows = list(csv.DictReader(lines, delimiter="|"))
    if not rows or "batch" not in rows[0]:
        raise InputError("FILE", str(path), "a pipe-separated attention table with a batch column")
    samples = tuple(psv_row(row, path, i) for i, row in enumerate(rows, start=2))
    device = rows[0].get("gpu_type") or None
    return Imported(samples, device)


# ----------------------------------------------------------------------------- grouped GEMM

GROUPED_COLUMNS = ("device", "dtype", "layout", "groups", "rows", "n", "k", "tflops", "time_us")


#: Fastest GEMM rate a measurement may imply: 20 PFLOP/s, above any GPU's datasheet peak
#: (B200 dense FP4 is 9 PFLOP/s, NVIDIA datasheet); a faster row is a typo (our choice).
MAX_GEMM_FLOPS = 2e16


def grouped_row(row: dict[str, str], path: Path, line: int) -> Sample:
    where = f"{path}:{line}"
    try:
        groups, n, k = int(row["groups"]), int(row["n"]), int(row["k"])
        counts = tuple(int(x) for x in row["rows"].split(";"))
        micros = float(row["time_us"]) if row.get("time_us") else None
        tflops = float(row["tflops"]) if row.get("tflops") else None
    except (KeyError, ValueError, AttributeError, TypeError) as exc:
        got = "a truncated row" if isinstance(exc, TypeError) else str(exc)
        raise InputError(where, got, ", ".join(GROUPED_COLUMNS)) from None
    if any(x is not None and not math.isfinite(x) for x in (micros, tflops)):
        raise InputError(where, f"tflops={tflops} time_us={micros}", "finite numbers")
    if len(counts) not in (1, groups) or min(counts) <= 0 or min(groups, n, k) <= 0:
        raise InputError(where, row.get("rows"), f"1 or groups={groups} positive row counts")
    rows = counts if len(counts) > 1 else ()
    total = sum(rows) if rows else counts[0] * groups
    if micros is None and tflops:
        micros = 2.0 * total * n * k / (tflops * 1e12) * 1e6
    if not micros or micros <= 0 or micros * 1e-6 > checks.MAX_SECONDS:
        raise InputError(where, f"tflops={tflops} time_us={micros}",
                         f"a positive time of at most {checks.MAX_SECONDS:.0f} s, or TFLOPS")
    if 2.0 * total * n * k / (micros * 1e-6) > MAX_GEMM_FLOPS:
        raise InputError(where, f"time_us={micros}", f"a time implying at most "
                         f"{MAX_GEMM_FLOPS / 1e12:,.0f} TFLOP/s (a physical GPU)")
    dtype = row.get("dtype") or "bf16"
    shape = GemmShape(m=max(counts), n=n, k=k, dtype=dtype, rows=rows)
    return Sample(op="grouped_gemm", gemm=shape, group=groups,
                  time=TimeStats(median=micros * 1e-6), source=str(path))


def import_grouped_gemm_csv(path: Path) -> Imported:
    """One sample per row; the file must name a single device."""
    lines = [ln for ln in read_file(path).splitlines() if ln.strip() and not ln.startswith("#")]
    rows = list(csv.DictReader(lines))
    if not rows or any(c not in rows[0] for c in GROUPED_COLUMNS):
        raise InputError("FILE", str(path), "a CSV with columns " + ", ".join(GROUPED_COLUMNS))
    devices = {r.get("device") or "" for r in rows}
    if len(devices) != 1:
        raise InputError("FILE", str(path), "rows of one device (got " + ", ".join(devices) + ")")
    samples = tuple(grouped_row(r, path, i) for i, r in enumerate(rows, start=2))
    return Imported(samples, devices.pop() or None)


# ----------------------------------------------------------------------------- public evidence


def import_public_csv(path: Path) -> Imported:
    """Rows copied from public nccl-tests logs (``calibration/public/*.csv``): ``#`` lines
    name the source; columns ``op, group, gpus_per_node, nbytes, time_us``."""
    lines = [ln for ln in read_file(path).splitlines() if ln.strip() and not ln.startswith("#")]
    samples = []
    for i, row in enumerate(csv.DictReader(lines), start=2):
        try:
            op, group, gpn = row["op"], int(row["group"]), int(row["gpus_per_node"])
            nbytes, secs = float(row["nbytes"]), float(row["time_us"]) * 1e-6
        except (KeyError, TypeError, ValueError):
            raise InputError(
                f"{path.name}:{i}", row, "op,group,gpus_per_node,nbytes,time_us"
            ) from None
        if op not in COLLECTIVE_OPS or group < 1 or gpn < 1 or nbytes <= 0 or secs <= 0:
            raise InputError(f"{path.name}:{i}", row, "a collective with positive numbers")
        samples.append(
            Sample(
                op=op,
                nbytes=nbytes,
                group=group,
                gpus_per_node=gpn,
                time=TimeStats(median=secs),
                source=path.name,
            )
        )
    return Imported(tuple(samples), None)
