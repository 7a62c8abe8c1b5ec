"""Link descriptions shared by every topology form: units, one kind of edge, a PCIe tree.

Moved out of :mod:`libra_des.hardware.fabric.topology` so that the level registry
(:mod:`libra_des.hardware.fabric.levels`) and the two-level legacy form can use them too.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from libra_des.config import Frozen

LinkType = Literal["nvlink", "pcie", "ethernet", "roce", "infiniband"]

_BW_UNITS = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_LAT_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_QUANTITY = re.compile(r"^\s*([-+0-9.eE]+)\s*([a-zA-Zµ/]*)\s*$")


def parse_bandwidth(value: Any) -> Any:
    """``400Gb/s`` -> 5e10, ``450 GB/s`` -> 4.5e11 (bytes/s); numbers pass through."""
    if not isinstance(value, str):
        return value
    match = _QUANTITY.match(value)
    unit = match.group(2).removesuffix("/s") if match else "?"
    if not match or unit[-1:] not in ("B", "b") or unit[:-1].lower() not in _BW_UNITS:
        raise ValueError("bytes/s as a number or a string like '400Gb/s' or '450GB/s'")
    per_bit = 1 / 8 if unit.endswith("b") else 1.0
    return float(match.group(1)) * _BW_UNITS[unit[:-1].lower()] * per_bit


def parse_latency(value: Any) -> Any:
    """``1.5us`` -> 1.5e-6 (seconds); numbers pass through."""
    if not isinstance(value, str):
        return value
    match = _QUANTITY.match(value)
    if not match or match.group(2) not in _LAT_UNITS:
        raise ValueError("seconds as a number or a string like '2us', '500ns'")
    return float(match.group(1)) * _LAT_UNITS[match.group(2)]


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
