"""All-to-all(v) across nodes, message by message.

NCCL's all-to-all posts one send and one receive per peer; between nodes each of them is a
point-to-point message through the sender's NIC and the receiver's NIC. The model, for a
traffic matrix ``M[src, dst]`` (bytes; the diagonal stays local):

- **per-peer latency and message-size efficiency**: a message of ``m`` bytes between nodes
  takes ``T(m) = alpha + m / (B * eff(m))`` on one NIC of rate ``B``, with ``T`` the inter-node
  curve (measured ``send_recv`` or all-to-all when the profile has one, else the datasheet
  default of :data:`~libra_des.hardware.collectives.INTER_DATASHEET`). A rank's messages go
  out one after another through its NIC, so its sending time is ``sum_dst T(M[src, dst])``,
  which charges ``alpha`` once per destination peer and the efficiency of each message's own
  size (many small messages are slower than one large one);
- **one NIC per GPU**: NCCL's all-to-all cannot spread one GPU's traffic over several NICs
  (NCCL maintainers in NVIDIA/nccl-tests#267), so ``B`` is one NIC's rate;
- **incast**: a receiver drains its inbound messages through its own NIC at the same rate, so
  a receiver with more than its share sets the time for every sender (``max`` over senders
  and receivers: the hottest receiver decides);
- **shared NICs and the spine**: a node's inter-node messages share ``node_bw`` (the node's
  NICs, or fewer paths when only fewer were measured; see
  :class:`~libra_des.hardware.communication.CurveBook`); ``B`` is already divided by the
  fabric's leaf/spine oversubscription, so on a 2:1 fabric cross-node traffic gets half a
  NIC.

Intra-node traffic runs over NVLink (or PCIe) beside it; the collective ends when the slowest
of these resources is done. Assumptions: messages of one rank do not overlap their latencies
(NCCL issues them in rounds; conservative), and cross-node flows do not collide on spine links
beyond the oversubscription ratio (ECMP hash collisions are not modelled).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from libra_des.hardware.collectives import Curve


@dataclass(frozen=True)
class InterNodeA2A:
    """The inter-node part of an all-to-all(v) on one layout (see the module docstring)."""

    curve: Curve
    nic_bw: float  # one rank's NIC rate (bytes/s)
    node_bw: float  # what a node's ranks share across nodes (bytes/s)

    def seconds(self, inter: np.ndarray, node: np.ndarray) -> float:
        """Time of the cross-node messages ``inter[src, dst]`` (0 where same node)."""
        nz = inter > 0
        if not nz.any():
            return 0.0
        m = inter[nz]
        per_msg = np.zeros_like(inter)
        per_msg[nz] = self.curve.seconds(m, self.nic_bw, 1)
        at_node = np.zeros_like(inter)
        at_node[nz] = self.curve.seconds(m, self.node_bw, 0)
        send, recv = per_msg.sum(1).max(), per_msg.sum(0).max()
        nodes = int(node.max()) + 1
        out_node = np.bincount(node, weights=at_node.sum(1), minlength=nodes).max()
        in_node = np.bincount(node, weights=at_node.sum(0), minlength=nodes).max()
        return float(max(send, recv, out_node, in_node))

    def uniform(self, n: int, gpn: int, per_peer: np.ndarray) -> np.ndarray:
        """Closed form of :meth:`seconds` for ``per_peer`` bytes between every pair of
        ranks, ``gpn`` ranks per node (every node full)."""
        p = np.asarray(per_peer, dtype=np.float64)
        peers = n - min(n, gpn)
        if peers == 0:
            return np.zeros_like(p)
        rank = peers * self.curve.seconds(p, self.nic_bw, 1)
        node = min(n, gpn) * peers * self.curve.seconds(p, self.node_bw, 0)
        return np.where(p > 0, np.maximum(rank, node), 0.0)
