"""A topology boiled down to the numbers the analytical cost models need.

``Topology.fabric()`` produces one; ``CostModel`` consumes one. Keeping this small frozen
record between them lets the cost models stay closed-form (and fast) while the full networkx
graph is used only by the flow-level network of the detailed mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Fabric:
    """Per-GPU bandwidths (bytes/s, one direction) and per-hop latencies (s).

    Assumptions: every node is identical; the intra-node fabric is either a non-blocking
    NVSwitch (each GPU's NVLink bandwidth is its limit) or a PCIe switch tree whose host bridge
    is shared by the GPUs behind it; inter-node traffic leaves through NICs whose bandwidth is
    already divided by the leaf/spine oversubscription ratio.

    ``pcie_switches``: how many PCIe switches the GPUs of a PCIe node are spread over (evenly);
    traffic between switches crosses the host bridge at ``pcie_bridge_bw`` per switch uplink.
    """

    gpus_per_node: int
    nodes: int
    intra_kind: Literal["nvswitch", "pcie"]
    intra_bw: float
    intra_latency: float
    inter_bw: float
    inter_latency: float
    nics_per_node: int
    pcie_bridge_bw: float = 0.0
    oversubscription: float = 1.0
    nvls: bool = False
    pcie_switches: int = 1

    @property
    def num_gpus(self) -> int:
        return self.gpus_per_node * self.nodes
