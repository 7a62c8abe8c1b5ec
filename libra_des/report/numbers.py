"""How the report writes numbers: three significant digits, with a unit, and never an
impossible value.

A result file keeps every digit (``0.0015963...``); a page to present shows what the model can
claim: three significant digits (our choice: the variance and cost models are not better than
about 1 %), times with an SI prefix (``1.60 ms``), rates with k/M/G (``792k tokens/s``), shares
as per cent (``24.1 %``, at most two decimals: a share below 0.005 % shows as ``0.00 %``).
The unit of a value comes from its dotted name (:func:`unit_of`), the same naming the result
contract uses (``*_s`` seconds, ``*_fraction`` shares, ``*_per_s`` rates, ``*_gib``).

Before a number is shown it passes :func:`libra_des.results.plausibility.check_numbers`
(finite, shares in [0, 1], nothing negative): a value that fails shows as ``n/a``, never as
a number (:func:`show`).
"""

from __future__ import annotations

import math
from typing import Any

from libra_des.errors import CheckError
from libra_des.results.plausibility import SHARES, check_numbers

#: SI prefixes for times, largest first.
TIME_PREFIXES = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
#: Decimal multipliers for rates and counts, largest first.
BIG = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def sig3(value: float) -> str:
    """Three significant digits, in plain notation between 1e-3 and 1e6, else ``1.23e+09``."""
    value = rounded(value)
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    if not -3 <= magnitude < 6:
        return f"{value:.2e}"
    return f"{value:.{max(0, 2 - magnitude)}f}"


def rounded(value: float) -> float:
    """``value`` rounded to three significant digits (for whole numbers above 999 too)."""
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, 2 - math.floor(math.log10(abs(value))))


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


def with_unit(value: float, unit: str) -> str:
    """One finite number in its unit, three significant digits."""
    if unit == "share":
        pct = rounded(value * 100)
        decimals = min(2, max(0, 2 - math.floor(math.log10(abs(pct))))) if pct else 0
        return f"{pct:.{decimals}f} %"
    if unit == "s":
        scale, prefix = next(((f, p) for f, p in TIME_PREFIXES if abs(value) >= f),
                             TIME_PREFIXES[-1])
        return f"{sig3(rounded(value / scale))} {prefix}" if value else "0 s"
    if unit in ("tokens/s", "B", "FLOPs", "B/s", "FLOP/s", "/s"):
        scale, prefix = next(((f, p) for f, p in BIG if abs(value) >= f), (1.0, ""))
        number = sig3(rounded(value / scale))
        return f"{number}{prefix} {unit}" if unit == "tokens/s" else f"{number} {prefix}{unit}"
    if unit == "GiB":
        return f"{sig3(rounded(value))} GiB"
    if unit == "x":
        return f"{sig3(rounded(value))}×"
    return sig3(rounded(value))


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
