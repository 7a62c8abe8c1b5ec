"""Fabric levels: a topology is a list of levels, each a registered type with its own builder.

Level 0 is the *scale-up domain* (a node: GPUs on an NVSwitch, or on PCIe switches, plus the
host's PCIe tree and NICs). Every further level is a tier of switches that joins ``fan_out``
units of the level below (0: all of them) and has:

- ``bandwidth``: the rate of one link from the level below into this level, bytes/s per
  direction (level 1: a NIC port; higher levels: one switch-to-switch link, derived from the
  oversubscription when not given),
- ``latency``: that link's one-way latency (s),
- ``oversubscription``: the down:up ratio of this level's switches (how much less bandwidth
  leaves a unit of this level upward than enters it from below; the top level has none),
- ``count``: switches per unit (spine and core tiers; a leaf tier has one leaf per rail).

Registered types (:data:`LEVEL_TYPES`): ``nvswitch`` and ``pcie`` (level 0), ``rail_leaf``
(NIC ``k`` of every node of a group on leaf ``k``) and ``leaf`` (all NICs of a node on one
leaf) for level 1, ``spine`` and ``core`` above. Each type names its spec model and the
builder that grows its part of the graph (:class:`Tier` for the switch tiers,
:class:`~libra_des.hardware.fabric.topology.NodeTemplate` for the domain). Model assumptions:

- every unit of a level is identical and the cluster is packed from node 0, so a unit of
  level ``l`` holds ``span(l)`` consecutive nodes;
- every switch of a tier connects to every switch of the tier above in its unit (a full
  bipartite stage; real fat-trees wire planes, which changes path diversity, not rates);
- a switch's uplink carries its downlink capacity / ``oversubscription``, split evenly over
  the switches above it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field

from libra_des.config import Frozen
from libra_des.hardware.fabric.links import (
    Bandwidth,
    Latency,
    LinkSpec,
    LinkType,
    PcieSpec,
    link_attrs,
)

#: An edge as the builders yield it: (graph node, graph node, attributes).
Edge = tuple[str, str, dict[str, Any]]


class DomainLevel(Frozen):
    """Level 0's host side: ``nics`` NICs per node on the PCIe switches (or the host)."""

    nics: int = Field(default=0, ge=0)
    nic_attach: Literal["pcie_switch", "host"] = "pcie_switch"


class NVSwitchLevel(DomainLevel):
    """GPUs on one logical non-blocking NVSwitch (``bandwidth``: a GPU's NVLink per
    direction); ``nvls``: in-switch reductions; ``pcie``: the host tree the NICs hang off."""

    type: Literal["nvswitch"]
    link: LinkType = "nvlink"
    bandwidth: Bandwidth
    latency: Latency = 0.0
    nvls: bool = False
    pcie: PcieSpec

    def gpu_link(self) -> LinkSpec | None:
        return LinkSpec(type=self.link, bandwidth=self.bandwidth, latency=self.latency)

    def host_tree(self) -> PcieSpec:
        return self.pcie


class PcieLevel(DomainLevel):
    """GPUs on ``switches`` PCIe switches under one host bridge (no NVLink): ``bandwidth`` and
    ``latency`` describe a GPU's PCIe link, ``uplink`` a switch's link to the host bridge."""

    type: Literal["pcie"]
    switches: int = Field(default=1, gt=0)
    bandwidth: Bandwidth
    latency: Latency = 0.0
    uplink: LinkSpec | None = None

    def gpu_link(self) -> LinkSpec | None:
        return None

    def host_tree(self) -> PcieSpec:
        link = LinkSpec(type="pcie", bandwidth=self.bandwidth, latency=self.latency)
        return PcieSpec(switches=self.switches, link=link, uplink=self.uplink)


class NetworkLevel(Frozen):
    """Fields every switch tier shares (module docstring)."""

    link: LinkType = "roce"
    latency: Latency = 0.0
    fan_out: int = Field(default=0, ge=0)
    oversubscription: float = Field(default=1.0, gt=0)
    #: The level's switches reduce in the network (InfiniBand SHARP): NCCL's CollNet runs.
    in_network_reduction: bool = False


class LeafLevel(NetworkLevel):
    """Level 1: leaves that the NICs plug into; ``bandwidth`` is one NIC port's rate and
    ``fan_out`` the nodes of one leaf group (default 32: a 64-port leaf, half down)."""

    type: Literal["rail_leaf", "leaf"]
    bandwidth: Bandwidth
    fan_out: int = Field(default=32, ge=0)


class SwitchLevel(NetworkLevel):
    """Level 2 and up: ``count`` switches per unit joining ``fan_out`` units below."""

    type: Literal["spine", "core"]
    bandwidth: Bandwidth | None = None
    count: int = Field(default=8, ge=0)


LevelSpec = Annotated[
    NVSwitchLevel | PcieLevel | LeafLevel | SwitchLevel, Field(discriminator="type")
]
Domain = NVSwitchLevel | PcieLevel
Network = LeafLevel | SwitchLevel


@dataclass(frozen=True)
class Tier:
    """A grown switch tier (level ``index`` >= 1) of a cluster of ``nodes`` nodes.

    ``span``: nodes per unit (the whole cluster when the level joins everything);
    ``width``: switches per unit; ``down_ports``: links one switch has to the level below;
    ``link``: one such link with its bandwidth resolved.
    """

    index: int
    spec: Network
    span: int
    units: int
    width: int
    down_ports: int
    link: LinkSpec

    @property
    def kind(self) -> str:
        """The graph nodes' ``kind`` (``leaf`` for both leaf types, as routes expect)."""
        return "leaf" if isinstance(self.spec, LeafLevel) else self.spec.type

    def name(self, unit: int, k: int) -> str:
        if isinstance(self.spec, LeafLevel):
            return f"leaf{unit}.{k}"
        return f"{self.spec.type}{k}" if self.units == 1 else f"{self.spec.type}{unit}.{k}"

    def switches(self) -> Iterator[str]:
        for unit in range(self.units):
            for k in range(self.width):
                yield self.name(unit, k)

    def unit_of(self, node: int) -> int:
        return node // self.span

    def uplink_capacity(self) -> float:
        """What one switch sends upward: its downlink capacity / oversubscription."""
        return self.down_ports * self.link.bandwidth / self.spec.oversubscription


def grow_tiers(levels: tuple[Network, ...], nodes: int, nics: int) -> tuple[Tier, ...]:
    """The switch tiers a cluster of ``nodes`` nodes with ``nics`` NICs each needs.

    A tier above level 1 is grown only while the tier below it is not already one switch
    (a single leaf group of one rail) or one unit (a single pod needs no core)."""
    tiers: list[Tier] = []
    span = 1
    for index, spec in enumerate(levels, start=1):
        span = max(span * spec.fan_out, 1) if spec.fan_out else max(nodes, span)
        units = -(-nodes // span)
        if isinstance(spec, LeafLevel):
            rail = spec.type == "rail_leaf"
            width = nics if rail else min(1, nics)
            tier = Tier(index, spec, span, units, width, span * (1 if rail else nics),
                        LinkSpec(type=spec.link, bandwidth=spec.bandwidth, latency=spec.latency))
        else:
            below = tiers[-1] if tiers else None
            if below is None or not (below.units > 1 or (below.index == 1 and below.width > 1)):
                break
            tier = switch_tier(index, spec, span, units, below)
        tiers.append(tier)
    return tuple(tiers)


def network_spans(levels: tuple[Network, ...]) -> list[int]:
    """Nodes one unit of each switch level holds as the file gives it (0: all nodes)."""
    spans, span = [], 1
    for level in levels:
        span = span * level.fan_out
        spans.append(span)
    return spans


def switch_tier(index: int, spec: SwitchLevel, span: int, units: int, below: Tier) -> Tier:
    """A spine or core tier; its link carries the lower switch's uplink / ``count``."""
    ports = below.width * (span // below.span if spec.fan_out else below.units)
    bandwidth = spec.bandwidth
    if bandwidth is None:
        ratio = below.spec.oversubscription * spec.count
        bandwidth = below.down_ports * below.link.bandwidth / ratio if ratio > 0 else 0.0
    link = LinkSpec.model_construct(type=spec.link, bandwidth=bandwidth, latency=spec.latency)
    return Tier(index, spec, span, units, spec.count, ports, link)


def tier_edges(tier: Tier, below: Tier) -> Iterator[Edge]:
    """Builder of a spine or core tier: each switch below to every switch of its unit."""
    attrs = link_attrs(tier.link)
    for unit in range(below.units):
        up = tier.unit_of(unit * below.span)
        for k in range(below.width):
            for s in range(tier.width):
                yield below.name(unit, k), tier.name(up, s), attrs


def leaf_edges(tier: Tier, nodes: int, nics: int) -> Iterator[Edge]:
    """Builder of a leaf tier: NIC ``k`` of node ``a`` to its leaf (module docstring)."""
    attrs = link_attrs(tier.link)
    for a in range(nodes):
        for k in range(nics):
            yield f"n{a}/nic{k}", leaf_name(tier, a, k), attrs


def leaf_name(tier: Tier, node: int, nic: int) -> str:
    rail = nic if tier.spec.type == "rail_leaf" else 0
    return tier.name(tier.unit_of(node), rail)


@dataclass(frozen=True)
class LevelType:
    """A registered level type: its spec model, its role and (for switch tiers) its builder.

    Domain types are grown by :class:`~libra_des.hardware.fabric.topology.NodeTemplate` from the
    spec's ``gpu_link`` and ``host_tree``."""

    spec: type[Frozen]
    role: Literal["domain", "leaf", "switch"]
    builder: Callable[..., Iterator[Edge]] | None = None


LEVEL_TYPES: dict[str, LevelType] = {
    "nvswitch": LevelType(NVSwitchLevel, "domain"),
    "pcie": LevelType(PcieLevel, "domain"),
    "rail_leaf": LevelType(LeafLevel, "leaf", leaf_edges),
    "leaf": LevelType(LeafLevel, "leaf", leaf_edges),
    "spine": LevelType(SwitchLevel, "switch", tier_edges),
    "core": LevelType(SwitchLevel, "switch", tier_edges),
}


def level_order_error(levels: list[Any]) -> tuple[int, str] | None:
    """(index, what was allowed) of the first level in a wrong place, else None."""
    roles = [LEVEL_TYPES[lv.type].role for lv in levels]
    for i, role in enumerate(roles):
        want = "domain" if i == 0 else "leaf" if i == 1 else "switch"
        if role != want:
            names = [t for t, lt in LEVEL_TYPES.items() if lt.role == want]
            return i, " | ".join(names) + f" (level {i} is a {want} level)"
    seen = [lv.type for lv in levels[2:]]
    for i, name in enumerate(seen, start=2):
        if name in seen[: i - 2]:
            return i, f"a type not used twice (two {name} levels)"
    return None


def missing_level(tiers: tuple[Tier, ...], nodes: int) -> str:
    """What a disconnected fabric of ``nodes`` nodes lacks, in the file's terms: the level
    that would join the top level's units (or any network level, where the file has none)."""
    if not tiers:
        return f"a network level joining its {nodes} nodes (the file has none)"
    top = tiers[-1]
    return (f"a level above '{top.spec.type}' (level {top.index}): {nodes} nodes "
            f"fill {top.units} of its units of {top.span} nodes and nothing joins them; "
            "add a spine/core level or raise its fan_out")
