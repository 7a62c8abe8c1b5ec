"""A topology's description: the validated content of its YAML file (``TopologySpec``), and
the file handling around it (shipped names, ``topology_params`` overlays, the two-level form).

:mod:`libra_des.hardware.fabric.topology` grows a description into the graph with routes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from libra_des.config import ROOT, Frozen, read_yaml, resolve_path, validate
from libra_des.errors import InputError
from libra_des.hardware.fabric.levels import (
    Domain,
    LevelSpec,
    Network,
    NVSwitchLevel,
    PcieLevel,
    level_order_error,
)
from libra_des.hardware.fabric.two_level import TwoLevelTopologySpec, to_levels

SUFFIXES = (".yaml", ".yml")


class TopologySpec(Frozen):
    """The validated content of one topology YAML file: the node (``levels[0]``, with
    ``gpus_per_node`` GPUs) and the switch levels above it."""

    name: str = "topology"
    description: str | None = None
    gpu: str = "gpu"
    nodes: int = Field(default=1, gt=0)
    gpus_per_node: int = Field(gt=0)
    levels: list[LevelSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _levels_fit(self) -> TopologySpec:
        bad = level_order_error(self.levels)
        if bad is not None:
            raise InputError(f"levels[{bad[0]}].type", self.levels[bad[0]].type, bad[1])
        top = len(self.levels) - 1
        ratio = self.network[-1].oversubscription if self.network else 1.0
        if ratio != 1:
            raise InputError(f"levels[{top}].oversubscription", ratio, "1 at the top level")
        if top > 0 and self.domain.nics == 0:
            raise InputError("levels[0].nics", 0, "> 0 when switch levels follow")
        self._gpus_fit()
        return self

    def _gpus_fit(self) -> None:
        """The node's GPUs spread evenly over its PCIe switches and share its NICs evenly
        (each NIC serves the same number of GPUs, or each GPU the same number of NICs):
        the builders wire GPU ``i`` to switch ``i * switches // gpus`` and NIC
        ``i * nics // gpus``, which on an uneven node leaves NICs or rails without GPUs."""
        gpus, nics = self.gpus_per_node, self.domain.nics
        switches = self.domain.host_tree().switches
        if gpus % switches:
            raise InputError("gpus_per_node", gpus, f"a multiple of levels[0].pcie switches="
                             f"{switches} (GPUs spread evenly over the PCIe switches)")
        if nics and gpus % nics and nics % gpus:
            raise InputError("gpus_per_node", gpus, f"a multiple or a divisor of levels[0]."
                             f"nics={nics} (GPUs share the NICs evenly)")

    @property
    def domain(self) -> Domain:
        level = self.levels[0]
        assert isinstance(level, NVSwitchLevel | PcieLevel)  # level_order_error checked it
        return level

    @property
    def network(self) -> tuple[Network, ...]:
        return tuple(lv for lv in self.levels[1:] if isinstance(lv, Network))


def shipped_topologies() -> list[str]:
    return sorted(p.stem for p in (ROOT / "topologies").glob("*.yaml"))


def merge_params(data: dict[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """Overlay ``params`` (nested mappings or dotted keys) on a raw topology mapping; a
    number in a dotted key indexes a list (``levels.1.oversubscription``)."""
    out = dict(data)
    for key, value in params.items():
        head, _, rest = str(key).partition(".")
        if rest:
            value = {rest: value}
        old = out.get(head)
        if isinstance(value, Mapping) and isinstance(old, list):
            value = merge_list(old, value, head)
        elif isinstance(value, Mapping) and isinstance(old, Mapping):
            value = merge_params(dict(old), value)
        out[head] = value
    return out


def merge_list(old: list[Any], params: Mapping[str, Any], where: str) -> list[Any]:
    out = list(old)
    for key, value in params.items():
        head, _, rest = str(key).partition(".")
        if not head.isdigit() or int(head) >= len(out):
            raise InputError(f"topology_params.{where}.{head}", key, f"0..{len(out) - 1}")
        index = int(head)
        item = {rest: value} if rest else value
        old_item = out[index]
        if isinstance(item, Mapping) and isinstance(old_item, Mapping):
            item = merge_params(dict(old_item), item)
        out[index] = item
    return out


def read_spec(spec: str | Path) -> dict[str, Any]:
    path = Path(spec)
    found = path if path.is_file() else resolve_path(str(spec), Path.cwd(), "topologies", SUFFIXES)
    if found is None:
        names = ", ".join(shipped_topologies())
        raise InputError("topology", str(spec), f"an existing YAML file or one of: {names}")
    raw = read_yaml(found, "topology")
    if not isinstance(raw, Mapping):
        raise InputError("topology", str(spec), "a YAML mapping")
    return dict(raw)


def parse_spec(data: Mapping[str, Any]) -> TopologySpec:
    """Validate a level list, or a two-level file converted to one (module docstring).

    Errors name the field as written: ``topology.levels[1].bandwidth`` (list positions in
    brackets), ``topology.nic.bandwidth`` for a two-level file."""
    if "levels" not in data and isinstance(data, Mapping):
        legacy: TwoLevelTopologySpec = validate(TwoLevelTopologySpec, data, "topology.")
        data = to_levels(legacy)
    try:
        parsed: TopologySpec = validate(TopologySpec, data, "topology.")
    except InputError as exc:
        field = re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", exc.field)
        field = re.sub(r"\[(\d+)\]\.(nvswitch|pcie|rail_leaf|leaf|spine|core)\b", r"[\1]", field)
        raise InputError(field, exc.value, exc.allowed) from None
    return parsed
