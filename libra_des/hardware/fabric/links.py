"""Link descriptions shared by every topology form: units (pint), one kind of edge, a PCIe
tree.

Moved out of :mod:`libra_des.hardware.fabric.topology` so that the level registry
(:mod:`libra_des.hardware.fabric.levels`) and the two-level legacy form can use them too.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from libra_des.config import Frozen

LinkType = Literal["nvlink", "pcie", "ethernet", "roce", "infiniband"]

#: The units a topology may write (pint's definition syntax): bytes and bits per second with
#: decimal prefixes (k, M, G, T: the datasheets' rates), seconds with SI prefixes. A registry
#: of these alone, not pint's default one, whose ``Gb`` is the gilbert and ``mB`` a millibyte.
UNIT_DEFINITIONS = (
    "second = [time] = s", "byte = [information] = B", "bit = byte / 8 = b",
    "kilo- = 1e3 = k-", "mega- = 1e6 = M-", "giga- = 1e9 = G-", "tera- = 1e12 = T-",
    "milli- = 1e-3 = m-", "micro- = 1e-6 = µ- = u-", "nano- = 1e-9 = n-",
)
#: The smallest unit of a bandwidth, in bytes/s: a bit per second (a milli-anything rate is
#: a typo of a mega one).
SMALLEST_RATE = 1 / 8


@cache
def units() -> Any:
    """The unit registry of :data:`UNIT_DEFINITIONS` (pint imported here, on the first unit
    string: a topology of plain numbers never loads it)."""
    import pint

    registry: Any = pint.UnitRegistry(None, cache_folder=None)
    for definition in UNIT_DEFINITIONS:
        registry.define(definition)
    return registry


#: The units topology files write, by dimension, with their factors to the base unit: the
#: factors pint's registry above gives (``tests/test_link_units.py`` checks every entry
#: against it), kept so that the common forms parse without importing pint (its import and
#: registry cost about 0.3 s, a third of a 16,384-GPU fast step). Anything else goes to pint.
COMMON_UNITS: dict[str, dict[str, float]] = {
    "[information] / [time]": {
        f"{prefix}{unit}/s": scale * size
        for prefix, scale in (("", 1.0), ("k", 1e3), ("M", 1e6), ("G", 1e9), ("T", 1e12))
        for unit, size in (("B", 1.0), ("b", 1 / 8))},
    "[time]": {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9},
}
#: A plain decimal number followed by a unit symbol (a common form's whole text).
COMMON_FORM = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-zµ/]+)\s*")


def quantity(text: str, dimension: str, base: str, smallest: float = 0.0) -> float | None:
    """``text`` as a number of ``base`` units when it is a number with a unit of
    ``dimension`` (of at least ``smallest`` base units), else None. The value is the number
    times the unit's factor, one rounding as a hand multiplication would make."""
    form = COMMON_FORM.fullmatch(text)
    known = COMMON_UNITS.get(dimension, {})
    if form is not None and form.group(2) in known:
        number = form.group(1)
        # pint reads a whole number as an int and any other as a float: the same value.
        magnitude = float(int(number)) if number.isdigit() else float(number)
        factor = known[form.group(2)]
        return magnitude * factor if factor >= smallest else None
    import pint

    registry = units()
    try:
        parsed = registry.Quantity(text)
        factor = registry.Quantity(1.0, parsed.units).to(base).magnitude
    except (pint.PintError, ValueError, TypeError, SyntaxError, AttributeError):
        return None
    magnitude = parsed.magnitude
    if (str(parsed.dimensionality) != dimension or isinstance(magnitude, bool)
            or not isinstance(magnitude, int | float) or factor < smallest):
        return None
    return float(magnitude) * float(factor)


def parse_bandwidth(value: Any) -> Any:
    """``400Gb/s`` -> 5e10, ``450 GB/s`` -> 4.5e11 (bytes/s); numbers pass through."""
    if not isinstance(value, str):
        return value
    rate = quantity(value, "[information] / [time]", "B/s", SMALLEST_RATE)
    if rate is None:
        raise ValueError("bytes/s as a number or a string like '400Gb/s' or '450GB/s'")
    return rate


def parse_latency(value: Any) -> Any:
    """``1.5us`` -> 1.5e-6 (seconds); numbers pass through."""
    if not isinstance(value, str):
        return value
    seconds = quantity(value, "[time]", "s")
    if seconds is None:
        raise ValueError("seconds as a number or a string like '2us', '500ns'")
    return seconds


Bandwidth = Annotated[float, BeforeValidator(parse_bandwidth), Field(gt=0)]
Latency = Annotated[float, BeforeValidator(parse_latency), Field(ge=0)]


class LinkSpec(Frozen):
    """One kind of edge: bytes/s per direction, one-way latency (s), link technology."""

    type: LinkType
    bandwidth: Bandwidth
    latency: Latency = 0.0


class PcieSpec(Frozen):
    """PCIe tree: ``switches`` switches per node, each under the host bridge (CPU root)."""

    switches: int = Field(default=1, gt=0)
    link: LinkSpec
    uplink: LinkSpec | None = None

    @property
    def up(self) -> LinkSpec:
        return self.uplink or self.link


def link_attrs(spec: LinkSpec) -> dict[str, Any]:
    return {"bandwidth": spec.bandwidth, "latency": spec.latency, "kind": spec.type}
