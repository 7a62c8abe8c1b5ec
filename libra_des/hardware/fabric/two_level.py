"""The two-level topology form (sections ``nvlink``, ``pcie``, ``nic``, ``network``).

Still read, so that files written before the level list load unchanged: it is validated as
written (errors name its own fields, e.g. ``topology.nic.bandwidth``) and then converted to
the level list (:func:`to_levels`): the node becomes level 0, the NICs' leaves level 1 and the
spines level 2.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from libra_des.config import Frozen
from libra_des.hardware.fabric.links import Bandwidth, Latency, LinkSpec, LinkType, PcieSpec


class NVLinkSpec(LinkSpec):
    """Each GPU's link to the node's (logical) NVSwitch; ``nvls``: in-switch reductions."""

    type: LinkType = "nvlink"
    nvls: bool = False


class NicSpec(LinkSpec):
    """``count`` NICs per node; bandwidth/latency/type describe the NIC-to-leaf port."""

    type: LinkType = "roce"
    count: int = Field(default=1, gt=0)
    attach: Literal["pcie_switch", "host"] = "pcie_switch"


class NetworkSpec(Frozen):
    """Two-tier leaf/spine fabric between nodes."""

    type: LinkType = "roce"
    rail_optimized: bool = True
    nodes_per_leaf: int = Field(default=32, gt=0)
    spines: int = Field(default=8, ge=0)
    oversubscription: float = Field(default=1.0, gt=0)
    bandwidth: Bandwidth | None = None
    latency: Latency = 0.0


class TwoLevelTopologySpec(Frozen):
    """The validated content of a two-level topology YAML file."""

    name: str = "topology"
    description: str | None = None
    gpu: str = "gpu"
    nodes: int = Field(default=1, gt=0)
    gpus_per_node: int = Field(gt=0)
    nvlink: NVLinkSpec | None = None
    pcie: PcieSpec
    nic: NicSpec | None = None
    network: NetworkSpec = NetworkSpec()


def to_levels(spec: TwoLevelTopologySpec) -> dict[str, Any]:
    """The same topology as a level list (a mapping for :class:`TopologySpec`)."""
    nic, net = spec.nic, spec.network
    host: dict[str, Any] = {"nics": nic.count if nic else 0}
    if nic is not None:
        host["nic_attach"] = nic.attach
    if spec.nvlink is not None:
        link = spec.nvlink
        domain: dict[str, Any] = {
            "type": "nvswitch", "link": link.type, "bandwidth": link.bandwidth,
            "latency": link.latency, "nvls": link.nvls, "pcie": spec.pcie.model_dump(), **host,
        }
    else:
        pcie = spec.pcie
        domain = {
            "type": "pcie", "switches": pcie.switches, "bandwidth": pcie.link.bandwidth,
            "latency": pcie.link.latency,
            "uplink": pcie.uplink.model_dump() if pcie.uplink else None, **host,
        }
    levels: list[dict[str, Any]] = [domain]
    if nic is not None:
        levels.append({
            "type": "rail_leaf" if net.rail_optimized else "leaf", "link": nic.type,
            "bandwidth": nic.bandwidth, "latency": nic.latency, "fan_out": net.nodes_per_leaf,
            "oversubscription": net.oversubscription,
        })
        levels.append({
            "type": "spine", "link": net.type, "bandwidth": net.bandwidth,
            "latency": net.latency, "count": net.spines,
        })
    head = spec.model_dump(include={"name", "description", "gpu", "nodes", "gpus_per_node"})
    return {**head, "levels": levels}
