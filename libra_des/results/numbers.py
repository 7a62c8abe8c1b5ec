"""How result values are written for people: three significant digits, with a unit, and never an
impossible value.

A result file keeps every digit (``0.0015963...``); a page to present shows what the model can
claim: three significant digits (our choice: the variance and cost models are not better than
about 1 %), times with an SI prefix (``1.60 ms``), rates with k/M/G (``792k tokens/s``), shares
as per cent (``24.1 %``, at most two decimals: a share below 0.005 % shows as ``0.00 %``).
The unit of a value comes from its dotted name (:func:`unit_of`), the same naming the result
contract uses (``*_s`` seconds, ``*_fraction`` shares, ``*_per_s`` rates, ``*_gib``).

Before a number is shown it passes :func:`libra_des.results.plausibility.check_numbers`
(finite, shares in [0, 1], nothing negative): a value that fails shows as ``n/a``, never as
a number (:func:`show`). The formatting itself is
:mod:`libra_des.base.numbers` (one formatter for the terminal, the page and logs).
"""

from __future__ import annotations

from typing import Any

from libra_des.base.numbers import rounded, sig3, with_unit
from libra_des.errors import CheckError
from libra_des.results.plausibility import SHARES, check_numbers

__all__ = ["plausible", "rounded", "show", "sig3", "unit_of", "with_unit"]


def unit_of(dotted: str) -> str:
    """The unit of a result value from its dotted name (the result contract's suffixes): the
    last part decides shares, the last part with a unit suffix the rest
    (``step_time_s.mean`` is in seconds, ``layer_breakdown_s.combine.exposed`` too)."""
    parts = [p for p in dotted.split(".") if p and not p.isdigit()]
    last = parts[-1] if parts else dotted
    if last.endswith("fraction") or last in SHARES or last.endswith("_share"):
        return "share"
    for part in reversed(parts):
        if part.endswith("tokens_per_s"):
            return "tokens/s"
        if part.endswith("_per_s"):
            return "B/s" if "bytes" in part else "FLOP/s" if "flops" in part else "/s"
        if part.endswith("_s"):
            return "s"
        if part.endswith("_gib"):
            return "GiB"
        if part == "speedup":
            return "x"
        if "bytes" in part:
            return "B"
        if "flops" in part:
            return "FLOPs"
    return ""


def plausible(dotted: str, value: float) -> bool:
    """The checks every result passes (:func:`check_numbers`) hold for this one value."""
    try:
        check_numbers({dotted.split(".")[-1] if dotted else "value": value})
    except CheckError:
        return False
    return True


def show(value: Any, dotted: str = "", unit: str | None = None) -> str:
    """A value as the page writes it: numbers rounded with their unit (from ``dotted`` unless
    given), impossible ones as ``n/a``; text as it is."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "" if value is None else str(value)
    if not plausible(dotted, float(value)):
        return "n/a"
    if isinstance(value, int) and unit is None and not unit_of(dotted):
        return str(value)  # counts and ids stay exact
    return with_unit(float(value), unit_of(dotted) if unit is None else unit)
