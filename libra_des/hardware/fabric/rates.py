"""A topology boiled down to the numbers the analytical cost models need.

``Topology.fabric()`` produces one; ``CostModel`` consumes one. Keeping this small frozen
record between them lets the cost models stay closed-form (and fast) while the full networkx
graph is used only by the flow-level network of the detailed mode.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np


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

    More than two levels (:mod:`libra_des.hardware.fabric.levels`): ``tiers`` holds, for each switch
    level below the top, the nodes one of its units joins (0: all) and its oversubscription;
    ``oversubscription`` is their product and ``inter_bw`` the rate across the top level.
    Empty ``tiers`` means the two-level reading above: one leaf level of ``leaf_nodes`` nodes.

    ``collnet``: a network level reduces in the switch (SHARP), so NCCL's CollNet runs.

    Oversubscription *in force*: a switch's uplinks are provisioned for its full fan-out, so
    a leaf with fewer nodes attached than its ``fan_out`` (a cluster smaller than one leaf
    group) has more uplink per attached port than its nominal ratio; ``tiers`` and
    ``oversubscription`` hold the ratio in force (never below 1), as the flow model's links
    carry it. ``spines``: the uplinks of one leaf (one per switch of level 2; 0 when no
    level above the leaves is grown), over which ECMP spreads spine-crossing flows.
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
    spines: int = 0
    #: The leaf level's down:up ratio with every attached port sending (its nominal ratio x
    #: attached / provisioned ports; below 1 when the uplinks are sized for more ports than
    #: are attached) and the nodes attached to one leaf (0: not known, every port).
    leaf_load: float = 1.0
    leaf_attached: int = 0
    #: Nodes of one leaf whose traffic crosses its uplinks at the same time (0: all that are
    #: attached). Training sets it to the nodes one pipeline stage spans: a stage's entities
    #: exchange in lockstep, other stages' exchanges are staggered (docs/communication.md).
    busy_nodes: int = 0

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

    def pair_bw(self, src: int, dst: int) -> float:
        """One NIC's rate between GPUs ``src`` and ``dst`` of different nodes (see
        :meth:`pair_bws`)."""
        return float(self.pair_bws(np.array([src]), np.array([dst]))[0])

    def pair_bws(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """One NIC's rate between each GPU pair ``src[k]``, ``dst[k]`` of different nodes, as
        the topology routes them: line rate when both NICs sit on one leaf (same leaf group,
        and on a rail-optimised fabric the same rail), else the share of the lowest level
        whose unit holds both nodes (a cross-rail pair climbs past the leaves at least)."""
        gpn, nics = self.gpus_per_node, max(self.nics_per_node, 1)
        (a, i), (b, j) = np.divmod(src, gpn), np.divmod(dst, gpn)
        cross = (i * nics // gpn != j * nics // gpn) if self.rail_optimized else np.zeros(
            a.shape, bool)
        levels = self.tiers or ((self.leaf_nodes, self.oversubscription),)
        out = np.full(a.shape, float(self.inter_bw))
        # From the top level down, so the lowest level whose unit holds both nodes wins.
        for lvl in range(len(levels) - 1, -1, -1):
            span = levels[lvl][0]
            rate = self.inter_bw * math.prod(o for _, o in levels[lvl:])
            held = np.ones(a.shape, bool) if span <= 0 else a // span == b // span
            if lvl == 0:
                held &= ~cross
            out[held] = rate
        return out

    def busy_leaf_load(self) -> float:
        """The leaf's down:up load with only ``busy_nodes`` of its attached nodes sending."""
        attached = self.leaf_attached or 1
        busy = min(self.busy_nodes or attached, attached)
        return self.leaf_load * busy / attached
