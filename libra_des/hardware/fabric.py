"""A topology boiled down to the numbers the analytical cost models need.

``Topology.fabric()`` produces one; ``CostModel`` consumes one. Keeping this small frozen
record between them lets the cost models stay closed-form (and fast) while the full networkx
graph is used only by the flow-level network of the detailed mode.
"""

from __future__ import annotations

import math
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

    Leaf locality: ``leaf_nodes`` nodes share a leaf group (0: all nodes, one group); on a
    rail-optimised fabric NIC ``k`` of every node of a group sits on leaf ``k`` of the group,
    otherwise all NICs of a node share the group's leaf. Traffic that stays on one leaf moves
    at the NIC's line rate (:attr:`nic_line_bw`); only traffic crossing the spine is limited to
    ``inter_bw`` (the line rate over the oversubscription ratio).

    More than two levels (:mod:`libra_des.hardware.levels`): ``tiers`` holds, for each switch
    level below the top, the nodes one of its units joins (0: all) and its oversubscription;
    ``oversubscription`` is their product and ``inter_bw`` the rate across the top level.
    Empty ``tiers`` means the two-level reading above: one leaf level of ``leaf_nodes`` nodes.

    ``collnet``: a network level reduces in the switch (SHARP), so NCCL's CollNet runs.
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
    leaf_nodes: int = 0
    rail_optimized: bool = True
    tiers: tuple[tuple[int, float], ...] = ()
    collnet: bool = False

    @property
    def num_gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def nic_line_bw(self) -> float:
        """One NIC port's rate when the traffic stays on its leaf (no spine hop)."""
        return self.inter_bw * self.oversubscription

    def rail_bw(self, nodes: int) -> float:
        """Per-NIC rate of rail-aligned traffic (same NIC index on every node, as the rings
        and rail phases of NCCL collectives use) among ``nodes`` consecutive nodes that start
        a leaf group: line rate when they share the rails' leaves, else the share of the
        lowest level whose unit holds them all (the spine's share on two levels)."""
        levels = self.tiers or ((self.leaf_nodes, self.oversubscription),)
        for i, (span, _) in enumerate(levels):
            if span <= 0 or nodes <= span:
                # Below this level's unit traffic still crosses the uplinks of levels i..:
                # the top rate times the oversubscription of the levels it does not cross.
                return self.inter_bw * math.prod(o for _, o in levels[i:])
        return self.inter_bw
