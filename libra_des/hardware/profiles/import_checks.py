"""Strict checks for imported measurement rows: whole rows, finite positive sane numbers.

Measurement files are often copied from terminals and cut off. A row is accepted only when it
is complete (as many columns as its table header) and its numbers agree with each other; a
partial number (``13`` left of a cut ``1300.5``) must never become a sample. Every problem
is an :class:`~libra_des.errors.InputError` naming ``FILE:LINE``.

Bounds (our choices, far beyond any real measurement): message sizes up to 1 TiB, times up to
one hour, groups up to :data:`~libra_des.config.validation.MAX_GPUS` GPUs, sequences up to
:data:`~libra_des.config.validation.MAX_TOKENS` tokens.
"""

from __future__ import annotations

import math
from pathlib import Path

from libra_des.config.validation import MAX_GPUS, MAX_TOKENS
from libra_des.errors import InputError

__all__ = ["MAX_BYTES", "MAX_GPUS", "MAX_SECONDS", "MAX_TOKENS", "count", "group_size",
           "nccl_header", "nccl_row", "number"]

MAX_BYTES = float(1 << 40)
MAX_SECONDS = 3600.0
#: nccl-tests prints algbw = size / time with two decimals; above 1 GB/s a row whose time
#: disagrees with its algbw by more than this was cut or edited (our tolerance).
ALGBW_TOLERANCE = 0.02


def number(text: str, where: str, what: str, hi: float, positive: bool = True) -> float:
    """A finite number in ``(0, hi]`` (``[0, hi]`` unless ``positive``)."""
    try:
        value = float(text)
    except (TypeError, ValueError, OverflowError):
        raise InputError(where, text, f"a number for {what}") from None
    low_ok = value > 0 if positive else value >= 0
    if not math.isfinite(value) or not low_ok or value > hi:
        low = "> 0" if positive else ">= 0"
        raise InputError(where, text, f"a finite {what} {low} and <= {hi:g}")
    return value


def count(text: str, where: str, what: str, hi: int) -> int:
    """A whole number in ``[1, hi]`` (digits only: no ``1e3``, no sign, never cut short)."""
    text = str(text).strip()
    if not text.isascii() or not text.isdigit() or len(text) > 15:
        raise InputError(where, text, f"a whole number for {what} (1..{hi:,})")
    value = int(text)
    if not 1 <= value <= hi:
        raise InputError(where, text, f"{what} in 1..{hi:,}")
    return value


def nccl_header(text: str, path: Path) -> list[str]:
    """Column names of the nccl-tests table (``size count type ... time algbw ...``)."""
    for line in text.splitlines():
        cols = line.lstrip("#").split()
        if "size" in cols and "time" in cols:
            return cols
    raise InputError("FILE", str(path), "nccl-tests output with a size ... time header")


def nccl_row(cols: list[str], header: list[str], where: str) -> tuple[float, float] | None:
    """(bytes, microseconds) of one complete out-of-place row; None for a size-0 row."""
    if len(cols) != len(header):
        raise InputError(where, " ".join(cols),
                         f"a complete nccl-tests row of {len(header)} columns (truncated?)")
    size = number(cols[header.index("size")], where, "size in bytes", MAX_BYTES, positive=False)
    if size == 0:
        return None
    if not size.is_integer():
        raise InputError(where, cols[0], "a whole number of bytes")
    micros = number(cols[header.index("time")], where, "time in us", MAX_SECONDS * 1e6)
    if "algbw" in header:
        algbw = number(cols[header.index("algbw")], where, "algbw in GB/s", 1e9, positive=False)
        implied = size / micros / 1e3
        if algbw >= 1.0 and abs(implied / algbw - 1) > ALGBW_TOLERANCE:
            raise InputError(where, " ".join(cols),
                             f"time and algbw that agree (size/time = {implied:.4g} GB/s, "
                             f"algbw {algbw:g}); the row looks cut or edited")
    return size, micros


def group_size(value: int, where: str) -> int:
    """A collective's group: 1..MAX_GPUS GPUs."""
    if not 1 <= value <= MAX_GPUS:
        raise InputError(where, value, f"a group of 1..{MAX_GPUS:,} GPUs")
    return value
