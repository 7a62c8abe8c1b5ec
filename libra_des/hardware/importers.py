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

Each importer returns the samples and, when the file says, the device name.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from libra_des.errors import InputError
from libra_des.hardware.profile import (
    COLLECTIVE_OPS,
    AttentionShape,
    Sample,
    TimeStats,
    read_text,
)

FORMATS = ("nccl-tests", "vidur-csv", "attention-psv")


@dataclass(frozen=True)
class Imported:
    samples: tuple[Sample, ...]
    device: str | None


def read_file(path: Path) -> str:
    return read_text(path, "FILE", "text file")


def import_files(fmt: str, paths: list[Path]) -> Imported:
    """Import ``paths`` in format ``fmt``; the first device name found wins."""
    readers: dict[str, Callable[[Path], Imported]] = {
        "nccl-tests": import_nccl_tests,
        "vidur-csv": import_vidur_csv,
        "attention-psv": import_attention_psv,
    }
    if fmt not in readers:
        raise InputError("--format", fmt, " | ".join(FORMATS))
    parts = [readers[fmt](p) for p in paths]
    device = next((p.device for p in parts if p.device), None)
    return Imported(tuple(s for p in parts for s in p.samples), device)


# ----------------------------------------------------------------------------- nccl-tests

_BINARY = re.compile(r"(\w+?)_perf\b")
_NGPUS = re.compile(r"nThread\s+(\d+)\s+nGpus\s+(\d+)")
_G_FLAG = re.compile(r"\s-g\s+(\d+)")
_RANK = re.compile(
    r"#\s*Rank\s+\d+\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+.*?(NVIDIA.*)?$"
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
    """(ranks, ranks per node, device) from the header of one nccl-tests log."""
    ranks = [m for m in (_RANK.match(line.strip()) for line in text.splitlines()) if m]
    device = next((m.group(2).strip() for m in ranks if m.group(2)), None)
    if ranks:
        hosts = {m.group(1) for m in ranks}
        return len(ranks), len(ranks) // len(hosts), device
    found = _NGPUS.search(text)
    if found:
        n = int(found.group(1)) * int(found.group(2))
        return n, n, device
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
    col = nccl_time_column(text, path)
    samples = []
    for line in text.splitlines():
        cols = line.split()
        if not cols or not cols[0].isdigit() or len(cols) <= col:
            continue
        try:
            size, micros = float(cols[0]), float(cols[col])
        except ValueError:
            raise InputError("FILE", f"{path}: {line.strip()}", "numeric size and time") from None
        if size <= 0 or micros <= 0:
            continue
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
    return Imported(tuple(samples), device)


# ----------------------------------------------------------------------------- vidur

_VIDUR_DEVICE = re.compile(r"(a100|h100|h200|a40|l40s?)", re.IGNORECASE)


def vidur_row(row: dict[str, str], path: Path, line: int) -> Sample:
    op = row.get("collective", "")
    if op not in COLLECTIVE_OPS:
        raise InputError(f"{path}:{line}", op, " | ".join(COLLECTIVE_OPS))
    try:
        stats = {
            k: float(row[f"time_stats.{op}.{k}"]) * 1e-3
            for k in ("median", "mean", "min", "max", "std")
        }
        size = float(row["size"])
        workers = int(row["num_workers"])
        per_node = int(row["devices_per_node"])
    except (KeyError, ValueError) as exc:
        raise InputError(
            f"{path}:{line}", str(exc), "Vidur profiling columns (time_stats.OP.*, size, ...)"
        ) from None
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
        if s.nbytes and s.time.median > 0:
            samples.append(s)
    device = _VIDUR_DEVICE.search(path.name)
    return Imported(tuple(samples), device.group(1).upper() if device else None)


# ----------------------------------------------------------------------------- attention

_TERM = re.compile(r"^\[\s*(\d+(?:\s*,\s*\d+)*)?\s*\]\s*(?:\*\s*\(?\s*(\d+)\s*\)?)?$")


def parse_batch(text: str, where: str) -> tuple[tuple[int, int], ...]:
    """``[32] * (1024)`` -> ((32, 1024),); ``[1, 2] + [3] * 2`` -> ((1,1),(2,1),(3,2))."""
    runs: dict[int, int] = {}
    for term in text.split("+"):
        match = _TERM.match(term.strip())
        if not match or match.group(1) is None:
            raise InputError(where, text, "a list like [32] * (1024) or [100, 200] (+ ...)")
        repeat = int(match.group(2) or 1)
        for length in (int(x) for x in match.group(1).split(",")):
            runs[length] = runs.get(length, 0) + repeat
    return tuple(sorted(runs.items()))


def psv_row(row: dict[str, str], path: Path, line: int) -> Sample:
    where = f"{path}:{line}"
    try:
        tp, cp = int(row["tp"]), int(row["cp"])
        hqo, hkv, dim = int(row["hqo"]), int(row["hkv"]), int(row["d"])
        total = int(row["total_len"])
        millis = float(row["total_latency(ms)"])
    except (KeyError, ValueError) as exc:
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
