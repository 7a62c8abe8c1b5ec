"""All-to-all(v) across nodes, message by message.

NCCL's all-to-all posts one send and one receive per peer; between nodes each of them is a
point-to-point message through the sender's NIC and the receiver's NIC. The model, for a
traffic matrix ``M[src, dst]`` (bytes; the diagonal stays local):

- **per-peer latency and message-size efficiency**: a message of ``m`` bytes between nodes
  takes ``T(m) = alpha + m / (B * eff(m))`` on one NIC of rate ``B``, with ``T`` the inter-node
  curve (measured ``send_recv`` or all-to-all when the profile has one, else the datasheet:
  ``alpha`` the hop latency, ``eff`` :data:`~libra_des.hardware.collectives.NIC_EFFICIENCY`).
  A rank's messages go out one after another through its NIC, so its sending time is
  ``once + sum_dst T(M[src, dst])``: ``alpha`` once per destination peer (LogGP's gap), the
  efficiency of each message's own size (many small messages are slower than one large
  one), and with datasheet curves the rest of one message's software latency
  (:data:`~libra_des.hardware.collectives.NET_P2P_LATENCY`) once, as the first message's;
- **one NIC per GPU**: NCCL's all-to-all cannot spread one GPU's traffic over several NICs
  (NCCL maintainers in NVIDIA/nccl-tests#267), so ``B`` is one NIC's rate;
- **incast**: a receiver drains its inbound messages through its own NIC at the same rate, so
  a receiver with more than its share sets the time for every sender (``max`` over senders
  and receivers: the hottest receiver decides);
- **shared NICs and the spine**: a node's inter-node messages share ``node_bw`` (the node's
  NICs, or fewer paths when only fewer were measured; see
  :class:`~libra_des.hardware.communication.CurveBook`). On an oversubscribed fabric a message
  that stays on one leaf (same leaf group, and on a rail-optimised fabric the same rail, as the
  topology routes it) moves at the NIC's line rate; one that crosses the spine gets the line
  rate over the oversubscription ratio (``nic_bw``): on ``h200-roce-railopt-2to1`` the
  cross-rail messages (7 of 8 peers per node) get half a NIC. With more switch levels
  (``fabric.tiers``) each message moves at the rate of the lowest level whose unit holds
  both ends: the line rate over the oversubscription of the levels it climbs through.
  These are separate bottlenecks draining at once (the NIC for every message, each level's
  uplink share for the messages that climb past it): a rank's time is the slowest of them,
  as in the flow model, not their sum;
- **ECMP**: the spine-crossing bottlenecks run slower by the expected collision factor of
  the layout's flows hashed onto a leaf's uplinks (``leaves.ecmp``, :mod:`~libra_des.
  hardware.ecmp`).

Intra-node traffic runs over NVLink (or PCIe) beside it; the collective ends when the slowest
of these resources is done. Assumption: messages of one rank do not overlap their latencies
(NCCL issues them in rounds; conservative).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from libra_des.hardware.collectives import Curve
from libra_des.hardware.fabric import Fabric


@dataclass(frozen=True)
class LeafMap:
    """Which cross-node messages stay on one leaf (module docstring).

    Ranks are packed ``gpn`` per node from local GPU 0 and the group starts on a leaf-group
    boundary. ``gain``: the line rate over the spine rate (the oversubscription ratio).
    """

    gpn: int
    gpus_per_node: int
    nics: int
    leaf_nodes: int
    rail_optimized: bool
    gain: float
    tiers: tuple[tuple[int, float], ...] = ()
    ecmp: float = 1.0  # expected spine-collision factor (hardware/ecmp.py)

    @classmethod
    def of(cls, fabric: Fabric, gpn: int, ecmp: float = 1.0) -> LeafMap:
        return cls(
            gpn,
            fabric.gpus_per_node,
            max(fabric.nics_per_node, 1),
            fabric.leaf_nodes,
            fabric.rail_optimized,
            fabric.oversubscription,
            fabric.tiers,
            ecmp,
        )

    @property
    def split(self) -> bool:
        """Whether leaf-local and spine-crossing messages are priced apart."""
        return self.gain > 1 or self.ecmp > 1

    def upper(self, n: int) -> list[tuple[np.ndarray, float]]:
        """Above the leaf (fabrics of more than two switch levels): per level below the top,
        [n, n] True where both ranks' nodes share one of its units, and the rate gain there
        over the top level's (the oversubscription of the levels not crossed)."""
        node = np.arange(n) // self.gpn
        out = []
        for i, (span, _) in enumerate(self.tiers[1:], start=1):
            group = node // span if span > 0 else np.zeros_like(node)
            out.append((group[:, None] == group[None, :], math.prod(o for _, o in self.tiers[i:])))
        return out

    def leaf_mean(self, t: np.ndarray) -> np.ndarray:
        """``[S, n]`` per-rank seconds -> each rank's leaf mean: the ranks of one leaf share
        its uplinks (their flows are hashed over all of them), so a spine bottleneck is the
        leaf's, not one NIC's 1/fan-out share."""
        n = t.shape[-1]
        rank = np.arange(n)
        node = rank // self.gpn
        group = node // self.leaf_nodes if self.leaf_nodes > 0 else np.zeros_like(node)
        nic = (rank % self.gpn) * self.nics // self.gpus_per_node
        leaf = group * self.nics + (nic if self.rail_optimized else 0)
        port = node * self.nics + nic  # ranks behind one NIC share its port
        out = np.empty_like(t)
        for lid in np.unique(leaf):
            on = leaf == lid
            out[:, on] = (t[:, on].sum(axis=1) / len(np.unique(port[on])))[:, None]
        return out

    def local(self, n: int) -> np.ndarray:
        """[n, n] True where a message between ranks stays on one leaf."""
        rank = np.arange(n)
        node = rank // self.gpn
        group = node // self.leaf_nodes if self.leaf_nodes > 0 else np.zeros_like(node)
        same = group[:, None] == group[None, :]
        if self.rail_optimized:
            rail = (rank % self.gpn) * self.nics // self.gpus_per_node
            same &= rail[:, None] == rail[None, :]
        return same


#: ((per-rank send s, per-rank receive s), (per-rank share of its node's out s, in s)).
Parts = tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class InterNodeA2A:
    """The inter-node part of an all-to-all(v) on one layout (see the module docstring)."""

    curve: Curve
    nic_bw: float  # one rank's NIC rate across the spine (bytes/s)
    node_bw: float  # what a node's ranks share across nodes, across the spine (bytes/s)
    leaves: LeafMap
    once: float = 0.0  # latency paid once per collective beyond the per-message alpha (s)

    def seconds(self, inter: np.ndarray, node: np.ndarray) -> float:
        """Time of the cross-node messages ``inter[src, dst]`` (0 where same node)."""
        nz = inter > 0
        if not nz.any():
            return 0.0
        local = self.leaves.local(inter.shape[0]) if self.leaves.split else None
        per_msg, at_node = (
            self.linear_parts(inter, nz, local)
            if self.is_linear
            else self.message_parts(inter, nz, local)
        )
        send, recv = per_msg
        nodes = int(node.max()) + 1
        out_node = np.bincount(node, weights=at_node[0], minlength=nodes).max()
        in_node = np.bincount(node, weights=at_node[1], minlength=nodes).max()
        return float(self.once + max(send.max(), recv.max(), out_node, in_node))

    @property
    def is_linear(self) -> bool:
        """One regime without a small-message term: sums of bytes suffice (fast path)."""
        return len(self.curve.pieces) == 1 and self.curve.pieces[0].half == 0

    def classes(self, nz: np.ndarray, local: np.ndarray | None) -> list[tuple[np.ndarray, float]]:
        """(mask, rate multiplier) per bottleneck, nested: every message at the line rate
        (the NIC), then those that climb past each level at that level's share over the
        ECMP collision factor (``leaves.ecmp``). A rank's time is the slowest of these
        bottlenecks (they drain concurrently, as flows do), not their sum."""
        if local is None:
            return [(nz, 1.0)]
        ecmp = self.leaves.ecmp
        out, rest = [(nz, self.leaves.gain)], nz & ~local
        for same, gain in self.leaves.upper(nz.shape[0]) if len(self.leaves.tiers) > 1 else []:
            out.append((rest, gain / ecmp))
            rest = rest & ~same
        return [*out, (rest, 1.0 / ecmp)]

    def message_parts(self, inter: np.ndarray, nz: np.ndarray, local: np.ndarray | None) -> Parts:
        """Per rank (send, receive) and per rank towards its node (out, in) seconds."""
        zero = np.zeros(inter.shape[0])
        send, recv, out, into = zero, zero, zero, zero
        for k, (mask, scale) in enumerate(self.classes(nz, local)):
            if mask.any():
                per_msg, at_node = np.zeros_like(inter), np.zeros_like(inter)
                m = inter[mask]
                per_msg[mask] = self.curve.seconds(m, self.nic_bw * scale, 1)
                at_node[mask] = self.curve.seconds(m, self.node_bw * scale, 0)
                s, r = per_msg.sum(1), per_msg.sum(0)
                if k:  # a spine bottleneck: the leaf's uplinks, shared by its ranks
                    s, r = self.leaves.leaf_mean(s[None])[0], self.leaves.leaf_mean(r[None])[0]
                send, recv = np.maximum(send, s), np.maximum(recv, r)
                if not k:  # the node's NICs; its spine share is the leaf's (above)
                    out, into = at_node.sum(1), at_node.sum(0)
        return (send, recv), (out, into)

    def linear_parts(self, inter: np.ndarray, nz: np.ndarray, local: np.ndarray | None) -> Parts:
        """:meth:`message_parts` in closed form for a linear curve (alpha + m / (B eta))."""
        piece = self.curve.pieces[0]
        zero = np.zeros(inter.shape[0])
        send, recv, out, into = zero, zero, zero, zero
        for k, (mask, scale) in enumerate(self.classes(nz, local)):
            m = inter if local is None else np.where(mask, inter, 0.0)
            rank_rate, node_rate = self.nic_bw * scale * piece.eta, self.node_bw * scale * piece.eta
            rows, cols = m.sum(1), m.sum(0)
            s = piece.alpha_step * mask.sum(1) + rows / rank_rate
            r = piece.alpha_step * mask.sum(0) + cols / rank_rate
            if k:  # a spine bottleneck: the leaf's uplinks, shared by its ranks
                s, r = self.leaves.leaf_mean(s[None])[0], self.leaves.leaf_mean(r[None])[0]
            send, recv = np.maximum(send, s), np.maximum(recv, r)
            if not k:  # the node's NICs; its spine share is the leaf's (above)
                out, into = rows / node_rate, cols / node_rate
        return (send, recv), (out, into)

    def uniform(self, n: int, gpn: int, per_peer: np.ndarray) -> np.ndarray:
        """:meth:`seconds` for ``per_peer`` bytes between every pair of ranks, ``gpn`` ranks
        per node (closed form when no message is faster than another)."""
        p = np.asarray(per_peer, dtype=np.float64)
        peers = n - min(n, gpn)
        if peers == 0:
            return np.zeros_like(p)
        if self.leaves.split:
            node = np.arange(n) // gpn
            cross = node[:, None] != node[None, :]
            return np.array([self.seconds(np.where(cross, x, 0.0), node) for x in p])
        rank = peers * self.curve.seconds(p, self.nic_bw, 1)
        at_node = min(n, gpn) * peers * self.curve.seconds(p, self.node_bw, 0)
        return np.where(p > 0, self.once + np.maximum(rank, at_node), 0.0)

    def breakdown(self, n: int, gpn: int, per_peer: float) -> dict[str, object]:
        """``cost --json``: each mechanism of a uniform all-to-all of ``per_peer`` bytes per
        pair, named with what it costs (seconds) or the rate it runs at (GB/s)."""
        peers = n - min(n, gpn)
        p = np.array([float(per_peer)])
        one = float(self.curve.seconds(p, self.nic_bw, 1)[0])
        alpha = self.curve.pieces[0].alpha_step
        moving = max(one - alpha, 1e-300)
        local = self.leaves.local(n) if self.leaves.split else None
        node = np.arange(n) // gpn
        cross = node[:, None] != node[None, :]
        spine = float((cross & ~local).sum() / cross.sum()) if local is not None else 1.0
        return {
            "remote_peers": peers,
            "message_size_efficiency": float(per_peer / (self.nic_bw * moving)),
            "per_peer_latency_s": peers * alpha,
            "once_latency_s": self.once,
            "one_nic_per_gpu_gbs": self.nic_bw / 1e9,
            "node_nics_gbs": self.node_bw / 1e9,
            "node_share_s": float(min(n, gpn) * peers * self.curve.seconds(p, self.node_bw, 0)[0]),
            "incast": "hottest receiver decides (uniform: every receiver alike)",
            "spine_share": spine,
            "pxn": "not modelled: cross-rail messages cross the spine",
            "ecmp": max(self.leaves.ecmp, 1.0),  # spine collisions beyond headroom
        }
