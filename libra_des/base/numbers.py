"""How every human-facing number is written: three significant digits, with a unit.

One formatter for the terminal, the report page, CSV headers and logs (``--json`` and result
files keep every digit). Three significant digits is our choice: the variance and cost models
are not better than about 1 %. Times take an SI prefix (``1.60 ms``), rates and sizes k/M/G/T
(``792k tokens/s``, ``1.07 GB``), shares per cent (``24.1 %``, at most two decimals). Plain
numbers stay in plain notation from 1e-3 up to 9999 and take a decimal prefix above
(``943k``), never a bare exponent except for magnitudes no prefix covers.
"""

from __future__ import annotations

import math

#: SI prefixes for times, largest first.
TIME_PREFIXES = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
#: Decimal multipliers for rates and counts, largest first.
BIG = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
#: Units written with a decimal multiplier (k, M, G, T).
SCALED = ("tokens/s", "B", "FLOPs", "B/s", "FLOP/s", "/s")


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


def with_unit(value: float, unit: str = "") -> str:
    """One number in its unit, three significant digits (``share``: a fraction as per cent;
    ``s``: seconds with an SI prefix; ``x``: a ratio; ``""``: a plain number, k/M/G/T from
    10 000 up)."""
    if not math.isfinite(value):
        return str(value)
    if unit == "share":
        pct = rounded(value * 100)
        decimals = min(2, max(0, 2 - math.floor(math.log10(abs(pct))))) if pct else 0
        return f"{pct:.{decimals}f} %"
    if unit == "s":
        scale, prefix = next(((f, p) for f, p in TIME_PREFIXES if abs(value) >= f),
                             TIME_PREFIXES[-1])
        return f"{sig3(rounded(value / scale))} {prefix}" if value else "0 s"
    if unit in SCALED:
        scale, prefix = next(((f, p) for f, p in BIG if abs(value) >= f), (1.0, ""))
        number = sig3(rounded(value / scale))
        return f"{number}{prefix} {unit}" if unit == "tokens/s" else f"{number} {prefix}{unit}"
    if unit == "GiB":
        return f"{sig3(rounded(value))} GiB"
    if unit == "x":
        return f"{sig3(rounded(value))}×"
    if unit:
        return f"{plain(value)} {unit}"
    return plain(value)


def plain(value: float) -> str:
    """A unitless number: three significant digits, k/M/G/T from 10 000 up (``12.3k``)."""
    if abs(value) >= 1e4:
        scale, prefix = next((f, p) for f, p in BIG if abs(value) >= f)
        return f"{sig3(rounded(value / scale))}{prefix}"
    return sig3(rounded(value))
