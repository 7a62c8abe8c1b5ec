"""Alpha-beta shapes of collective algorithms and the efficiency curves that time them.

A collective phase is described by how many latency steps it takes and how many bytes each
rank must push through its bottleneck link (``volume``). Its time on a link of rate ``B`` is a
piecewise alpha-beta curve (see :class:`~libra_des.hardware.profiles.profile.Piece`):
``steps * alpha_step + V / (B * eff(V))``, where ``eff`` is fitted from measurements or is 1.

Sizes follow nccl-tests' ``size`` column: the whole buffer for all_reduce and broadcast, the
gathered output for all_gather, the input for reduce_scatter, the bytes each rank sends in
total for all_to_all (its 1/n share to itself included), the message for send_recv.

Per-algorithm volumes and steps for ``n`` ranks and size ``S`` (assumptions stated once):

- ring: all_reduce 2(n-1)/n S in 2(n-1) steps; all_gather / reduce_scatter (n-1)/n S in n-1
  steps; broadcast a pipelined chain, S in n-1 steps.
- tree (NCCL's double binary tree): all_reduce 2S in 2 ceil(log2 n) steps (each rank sends
  half the data up and down each of two trees); broadcast 2S (an interior rank feeds two
  children) in ceil(log2 n) steps.
- direct: one round of concurrent transfers with every peer over a non-blocking switch;
  (n-1)/n S per rank for all_gather, reduce_scatter, all_to_all; all_reduce is a direct
  reduce_scatter then all_gather; broadcast makes the root send (n-1) S; send_recv sends S.
- nvls (NVLink SHARP, in-switch reduction and multicast): all_reduce sends S and receives S
  per rank in 2 steps, all_gather / reduce_scatter (n-1)/n S in 1 step.
- hierarchical is composed from these phases by the cost model (intra, inter, intra);
  multilevel likewise over every switch level (hierarchy.py).

The shapes are defined, beside each algorithm's transfer DAG, in
:mod:`libra_des.hardware.collectives.collective_catalogue`; their names stay importable from here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from libra_des.errors import InputError
from libra_des.hardware.collectives import collective_ops
from libra_des.hardware.collectives.collective_catalogue import (
    DEFAULT_ALGORITHM as DEFAULT_ALGORITHM,  # re-exported: defined with their DAGs
)
from libra_des.hardware.collectives.collective_catalogue import FLAT_ALGORITHMS as FLAT_ALGORITHMS
from libra_des.hardware.collectives.collective_catalogue import SHAPES as SHAPES
from libra_des.hardware.collectives.collective_catalogue import log2_steps as log2_steps
from libra_des.hardware.collectives.collective_catalogue import part as part
from libra_des.hardware.fabric.rates import Fabric
from libra_des.hardware.profiles.profile import COLLECTIVE_OPS, Piece

ALGORITHMS = (
    "ring", "tree", "direct", "hierarchical", "nvls", "multilevel",
    "nvls_tree", "collnet_direct", "collnet_chain", "pat",
)

#: Share of a NIC's line rate NCCL moves between nodes with large messages, used where a
#: profile has no inter-node measurement (datasheet tier). Public evidence (numbers and links in
#: calibration/public/nic-peak-efficiency.csv): NCCL's maintainers consider about 24 GB/s the
#: peak of a 200 Gb/s (25 GB/s) NIC (NVIDIA/nccl-tests#119, #160) and 48-49 GB/s that of a
#: 400 Gb/s ConnectX-7 (NVIDIA/nccl-tests#267): 0.96-0.98; we take the lower, 0.96.
NIC_EFFICIENCY = 0.96

#: Share of a NIC's line rate an all-to-all's cross-node messages move at, where a profile has
#: no inter-node measurement: its own figure from all-to-all measurements, not the ring's
#: (calibration/public/alltoall-efficiency.csv). NCCL's maintainers state 48-49 GB/s per
#: ConnectX-7 for all-to-all (one NIC per GPU, NVIDIA/nccl-tests#267): 0.96, the two-node
#: share; wider groups lose more to incast (hardware/collectives/a2a_incast.py, from the
#: CSV's fit rows).
#: NVIDIA/nccl#2409 and DeepEP there are a machine-wide cap or another library.
A2A_NIC_EFFICIENCY = 0.96

#: Fixed cost of one point-to-point message between GPUs on two nodes (NIC, switches and
#: NCCL's network proxy), used where a profile has no inter-node measurement: the latency of a
#: send/recv, and paid once by a cross-node all-to-all whose further messages each add the
#: hop latency (a LogGP-style gap; see alltoall.py). Public measurements (numbers and
#: links in calibration/public/p2p-latency-between-nodes.csv): 31-34 us for small sendrecv_perf
#: messages between two A40 nodes (NVIDIA/nccl-tests#214), 24 us for 2-10 KB send/recv between
#: two A100 DGX nodes (Vidur's profiles); we take the lower, 24 us. The topology's hop
#: latencies (a few us) describe the wire, not the software path.
NET_P2P_LATENCY = 24e-6

def check_op(op: str) -> str:
    if op not in COLLECTIVE_OPS:
        raise InputError("op", op, " | ".join(COLLECTIVE_OPS))
    return op


def phase_shape(op: str, algorithm: str, n: int, size: np.ndarray) -> tuple[np.ndarray, int]:
    """``(volume per rank, latency steps)`` of one flat algorithm (module docstring)."""
    s = np.asarray(size, dtype=np.float64)
    if (op, algorithm) not in SHAPES:
        allowed = " | ".join(FLAT_ALGORITHMS.get(op, ()))
        raise InputError("algorithm", algorithm, f"{allowed} (for {op})")
    if n <= 1:
        return np.zeros_like(s), 0
    factor, steps = SHAPES[(op, algorithm)](n)
    return factor * s, steps


def busbw_factor(op: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor: busbw = algbw * factor, algbw = size / time."""
    return collective_ops.get(op).busbw(n) if n > 1 else 1.0


def node_nic_bw(
    fabric: Fabric, ranks_per_node: int, paths: int | None = None, nodes: int | None = None
) -> float:
    """Inter-node bandwidth the group's ranks on one node can use together (rail NICs).

    GPU i uses NIC ``i * nics // gpus_per_node``, so ``g`` packed ranks reach
    ``min(g, nics)`` NICs, each ``fabric.inter_bw`` (already divided by oversubscription), or
    for rail-aligned traffic among ``nodes`` nodes :meth:`Fabric.rail_bw` (line rate while it
    stays on the rails' leaves). ``paths``: how many concurrent inter-node paths per node a
    measurement has shown (see :class:`~libra_des.hardware.collectives.communication.CurveBook`);
    ``None``
    trusts the datasheet.
    """
    nics = max(1, min(ranks_per_node, fabric.nics_per_node or 1, paths or ranks_per_node))
    return nics * (fabric.inter_bw if nodes is None else fabric.rail_bw(nodes))


def flat_rate(fabric: Fabric, group: int, ranks_per_node: int, paths: int | None = None) -> float:
    """Bottleneck rate of a flat algorithm: the GPU's own link, or inside multi-node rings
    (one channel per rail, every channel crossing each node boundary once on the same NIC
    index, so rail-aligned) the node's NICs."""
    if group <= ranks_per_node:
        return fabric.intra_bw
    nodes = -(-group // ranks_per_node)
    return min(fabric.intra_bw, node_nic_bw(fabric, ranks_per_node, paths, nodes))


@dataclass(frozen=True)
class Curve:
    """A piecewise alpha-beta curve and where its numbers came from.

    ``origin``: ``measured`` (fitted on this op, group and layout), ``borrowed`` (fitted on a
    neighbouring group size or op in the same scope) or ``datasheet`` (efficiency 1, the
    fabric's hop latency).
    """

    pieces: tuple[Piece, ...]
    origin: str

    @classmethod
    def datasheet(cls, latency: float, eta: float = 1.0) -> Curve:
        return cls(
            (Piece(start=0.0, alpha_step=latency, eta=eta, half=0.0, gamma=1.0),), "datasheet"
        )

    def seconds(self, volume: np.ndarray, bandwidth: float, steps: int) -> np.ndarray:
        """Time to move ``volume`` bytes per rank at link rate ``bandwidth`` in ``steps``.

        Non-decreasing in ``volume``: each regime is, and a later regime never starts below
        where the earlier one ended (a running maximum across regime boundaries).
        """
        v = np.maximum(np.asarray(volume, dtype=np.float64), 0.0)
        starts = [p.start for p in self.pieces[1:]] + [math.inf]
        out = piece_seconds(self.pieces[0], np.minimum(v, starts[0]), bandwidth, steps)
        for piece, end in zip(self.pieces[1:], starts[1:], strict=True):
            here = piece_seconds(piece, np.minimum(v, end), bandwidth, steps)
            out = np.where(v >= piece.start, np.maximum(out, here), out)
        return out


def piece_seconds(p: Piece, v: np.ndarray, bandwidth: float, steps: int) -> np.ndarray:
    """One regime: ``steps * alpha + (V + half**gamma * V**(1-gamma)) / (B * eta)``."""
    slow = p.half**p.gamma * np.power(v, 1.0 - p.gamma) if p.half > 0 else 0.0
    return steps * p.alpha_step + (v + slow) / (bandwidth * p.eta)
