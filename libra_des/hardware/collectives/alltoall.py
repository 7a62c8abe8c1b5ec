"""All-to-all(v) across nodes, message by message, for one matrix or a stack of them.

NCCL's all-to-all posts one send and one receive per peer; between nodes each of them is a
point-to-point message through the sender's NIC and the receiver's NIC. The model, for a
traffic matrix ``M[src, dst]`` (bytes; the diagonal stays local), names five mechanisms
(each can be switched off, :class:`Mechanisms`, so tests can break it):

- **message-size efficiency**: a message of ``m`` bytes takes ``T(m) = alpha + m / (B eff(m))``
  on a NIC of rate ``B``, ``T`` the inter-node curve (measured ``send_recv`` or all-to-all
  when the profile has one, its own small-message regime included). A datasheet curve moves
  at :data:`~libra_des.hardware.collectives.curves.A2A_NIC_EFFICIENCY` of the line rate, and a
  message of at most NCCL's P2P LL threshold (16 KiB, ``enqueue.cc``) goes by the LL protocol
  at half of that (LL's 8-byte lines carry 4 bytes of data: NCCL's ``ring_ll`` factor 0.5;
  both from ``calibration/public/nccl_tuning.yaml``). A wider pool cuts the same bytes into
  smaller messages, so it can only lose efficiency;
- **per-peer cost**: ``alpha`` once per destination peer (the datasheet hop latency, LogGP's
  gap between back-to-back messages), plus, once a NIC holds more connections than its
  context cache, a PCIe round trip for the share of messages whose queue-pair context misses
  (:data:`QP_CACHE`, :data:`QP_MISS_S`; NCCL opens :data:`CHANNELS_PER_NET_PEER` connections
  per remote peer). The cost per peer grows with the peer count. With datasheet curves the
  rest of one message's software latency (``NET_P2P_LATENCY``) is paid once;
- **one NIC per GPU, or PXN**: NCCL's all-to-all cannot spread one GPU's traffic over several
  NICs (NVIDIA/nccl-tests#267), so ``B`` is one NIC. On a rail-optimised fabric NCCL's PXN
  (``NCCL_P2P_PXN_LEVEL`` 2, the default: every cross-rail send) first moves a cross-rail
  message over NVLink to the GPU of its node on the destination's rail, which sends it on that
  rail: the message stays on its rail's leaf inside a leaf group instead of crossing the
  spine (NVIDIA technical blog, "Doubling all2all performance with NCCL 2.12"), at the cost of
  one NVLink hop (sender out, proxy in; timed beside the node's own NVLink traffic, not added
  to it: our simplification);
- **incast**: a receiver drains its inbound messages through its own NIC at the same rate, so
  a receiver with more than its share sets the time for every sender (``max`` over senders
  and receivers: the hottest receiver decides);
- **ECMP**: a spine-crossing message's rate is divided by ``Mechanisms.ecmp`` (>= 1), the
  expected load of the busiest uplink over its fair share when the layout's flows are
  hashed onto a leaf's uplinks (balls into bins, :mod:`~libra_des.hardware.collectives.ecmp`, which
  :meth:`~libra_des.hardware.collectives.communication.Communication.inter_a2a` fills in).

Shared NICs and the spine: a node's inter-node messages share ``node_bw`` (the node's NICs, or
fewer paths when only fewer were measured; see
:class:`~libra_des.hardware.collectives.communication.CurveBook`). On an oversubscribed fabric a
message
that stays on one leaf (same leaf group, and without PXN on a rail-optimised fabric the same
rail) moves at the NIC's line rate; one that crosses the spine gets the line rate over the
oversubscription ratio (``nic_bw``). With more switch levels (``fabric.tiers``) each message
moves at the rate of the lowest level whose unit holds both ends.

These are separate bottlenecks draining at once, as flows do in the flow model: the NIC (at
the line rate) for every message, and each level's uplink share for the messages that climb
past it. A rank's time is the slowest of them, not their sum. A spine bottleneck is the
leaf's, not one NIC's: the ranks of a leaf hash their flows over all of its uplinks, so a
rank's spine seconds are its leaf's mean per NIC port (:meth:`LeafMap.leaf_mean`).

Intra-node traffic runs over NVLink (or PCIe) beside it; the collective ends when the slowest
of these resources is done. Assumptions: messages of one rank do not overlap their latencies
(NCCL issues them in rounds; conservative); ranks are packed ``gpn`` per node from local GPU 0
and the group starts on a leaf-group boundary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from libra_des.base.kernel import Bools, Floats
from libra_des.hardware.collectives.curves import Curve
from libra_des.hardware.fabric.rates import Fabric

#: Connections (queue pairs) a NIC keeps in its on-chip context cache before a message's QP
#: context has to be fetched from host memory. Our assumption: vendors do not publish the
#: size; FaSST (Kalia et al., OSDI 2016) measured ConnectX-3 throughput falling beyond a few
#: hundred connections, and later NICs cache more; we take 1,024 for ConnectX-7.
QP_CACHE = 1024
#: Cost of one QP-context miss: a PCIe round trip from the NIC to host memory. Our assumption
#: (PCIe Gen5 x16 read round trips of about 1 us).
QP_MISS_S = 1e-6
#: Connections NCCL opens per remote peer for point-to-point traffic
#: (``NCCL_NCHANNELS_PER_NET_PEER`` default 2, NCCL environment-variable documentation).
CHANNELS_PER_NET_PEER = 2


@dataclass(frozen=True)
class Mechanisms:
    """Which all-to-all mechanisms are on (module docstring); all on by default.

    ``ecmp``: the rate divisor of spine-crossing messages from ECMP hash collisions; None
    (the default): the layout's expected factor from :mod:`~libra_des.hardware.collectives.ecmp`; a
    number replaces it (1: no collisions, as per-packet spraying would give).
    """

    size_efficiency: bool = True
    per_peer: bool = True
    pxn: bool = True
    incast: bool = True
    ecmp: float | None = None
    fan_in: bool = True  # the NICs' incast share on datasheet curves (a2a_incast.py)


@dataclass(frozen=True)
class Protocol:
    """Message-size efficiency of a datasheet curve: messages up to ``threshold`` bytes move
    at ``small_share`` of the curve's rate (NCCL's P2P LL protocol)."""

    threshold: float
    small_share: float


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

    @classmethod
    def of(cls, fabric: Fabric, gpn: int) -> LeafMap:
        return cls(
            gpn,
            fabric.gpus_per_node,
            max(fabric.nics_per_node, 1),
            fabric.leaf_nodes,
            fabric.rail_optimized,
            fabric.oversubscription,
            fabric.tiers,
        )

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

    def rails(self, n: int) -> np.ndarray:
        """Each rank's rail (the NIC index its GPU sends on)."""
        return (np.arange(n) % self.gpn) * self.nics // self.gpus_per_node

    def group(self, n: int) -> Bools:
        """[n, n] True where both ranks' nodes share one leaf group."""
        node = np.arange(n) // self.gpn
        group = node // self.leaf_nodes if self.leaf_nodes > 0 else np.zeros_like(node)
        result: Bools = group[:, None] == group[None, :]
        return result

    def leaf_mean(self, t: np.ndarray) -> np.ndarray:
        """``[S, n]`` per-rank seconds -> each rank's leaf mean per NIC port: the ranks of one
        leaf share its uplinks (their flows are hashed over all of them), so a spine
        bottleneck is the leaf's, not one NIC's share. Ranks behind one NIC share its port."""
        s, n = t.shape
        node = np.arange(n) // self.gpn
        group = node // self.leaf_nodes if self.leaf_nodes > 0 else np.zeros_like(node)
        rail = self.rails(n)
        _, leaf = np.unique(group * self.nics + (rail if self.rail_optimized else 0),
                            return_inverse=True)
        leaves = int(leaf.max()) + 1
        _, port = np.unique(node * self.nics + rail, return_inverse=True)
        ports = np.bincount(np.unique(leaf * n + port) // n, minlength=leaves)
        flat = (np.arange(s)[:, None] * leaves + leaf[None, :]).ravel()
        sums = np.bincount(flat, weights=t.ravel(), minlength=s * leaves).reshape(s, leaves)
        return (sums / ports)[:, leaf]

    def local(self, n: int, pxn: bool = False) -> np.ndarray:
        """[n, n] True where a message between ranks stays on one leaf (with PXN a cross-rail
        message moves to the destination's rail inside its node first)."""
        same = self.group(n)
        if self.rail_optimized and not pxn:
            rail = self.rails(n)
            same &= rail[:, None] == rail[None, :]
        return same


#: (per-rank send s, receive s, node-share out s, in s, PXN NVLink s): each [S, n].
Terms = tuple[Floats, Floats, Floats, Floats, Floats]


@dataclass(frozen=True)
class InterNodeA2A:
    """The inter-node part of an all-to-all(v) on one layout (see the module docstring)."""

    curve: Curve
    nic_bw: float  # one rank's NIC rate across the spine (bytes/s)
    node_bw: float  # what a node's ranks share across nodes, across the spine (bytes/s)
    leaves: LeafMap
    once: float = 0.0  # latency paid once per collective beyond the per-message alpha (s)
    protocol: Protocol | None = None  # datasheet curves: NCCL's P2P protocol by message size
    hop_bw: float = 0.0  # NVLink rate of PXN's extra hop (0: no NVLink, no PXN)
    on: Mechanisms = field(default_factory=Mechanisms)
    fan_in: float = 1.0  # incast share already in nic_bw and node_bw (a2a_incast.py)

    # ------------------------------------------------------------------ mechanisms
    @property
    def pxn(self) -> bool:
        return self.on.pxn and self.leaves.rail_optimized and self.hop_bw > 0

    @property
    def ecmp(self) -> float:
        """The ECMP rate divisor in force (>= 1; 1 when nothing filled it)."""
        return max(self.on.ecmp or 1.0, 1.0)

    def classes(self, n: int) -> list[tuple[np.ndarray | None, float]]:
        """(pair mask or None for all, rate multiplier) per bottleneck, nested: first the NIC
        (every message, at the line rate), then per level the uplinks the messages climbing
        past it share (its rate over the ECMP factor). A rank's time is the slowest of these
        bottlenecks, not their sum (module docstring)."""
        gain, ecmp = self.leaves.gain, self.ecmp
        if gain <= 1 and ecmp <= 1:
            return [(None, 1.0)]
        out: list[tuple[np.ndarray | None, float]] = [(None, gain)]
        rest = ~self.leaves.local(n, self.pxn)
        for same, g in self.leaves.upper(n) if len(self.leaves.tiers) > 1 else []:
            out.append((rest, g / ecmp))
            rest = rest & ~same
        return [*out, (rest, 1.0 / ecmp)]

    def qp_miss(self, n: int, gpn: int) -> float:
        """Seconds a message pays for QP-context misses on its NIC (uniform access: a miss
        for the share of connections beyond the cache)."""
        if not self.on.per_peer:
            return 0.0
        per_nic = max(1, -(-self.leaves.gpus_per_node // self.leaves.nics))
        qps = (n - min(n, gpn)) * CHANNELS_PER_NET_PEER * min(per_nic, gpn)
        return QP_MISS_S * max(0.0, 1.0 - QP_CACHE / qps) if qps > 0 else 0.0

    def moved(self, m: np.ndarray) -> np.ndarray:
        """Bytes as the wire moves them: small messages by LL at its share of the rate."""
        if self.protocol is None or not self.on.size_efficiency:
            return m
        return np.where(m <= self.protocol.threshold, m / self.protocol.small_share, m)

    def message(self, m: np.ndarray, rate: float, gap: float) -> np.ndarray:
        """Seconds of messages of ``m`` bytes at ``rate`` (0 where ``m`` is 0)."""
        steps = 1 if self.on.per_peer else 0
        secs = self.curve.seconds(self.moved(m), rate, steps) + gap
        return np.where(m > 0, secs, 0.0)

    def nodal(self, m: np.ndarray, rate: float) -> np.ndarray:
        """Seconds the messages hold their node's shared NICs (no per-message latency)."""
        return np.where(m > 0, self.curve.seconds(self.moved(m), rate, 0), 0.0)

    # ------------------------------------------------------------------ pricing
    @property
    def is_linear(self) -> bool:
        """One regime without a small-message term: sums of bytes suffice (fast path)."""
        return len(self.curve.pieces) == 1 and self.curve.pieces[0].half == 0

    def stack(self, send: np.ndarray, gpn: int) -> np.ndarray:
        """Seconds of the cross-node part of each matrix ``send[s, src, dst]`` (pairs on one
        node are left out), from its per-rank sums
        (:func:`~libra_des.hardware.collectives.a2a_kernel.
        pair_sums`, one pass over the stack)."""
        from libra_des.hardware.collectives.a2a_kernel import (
            pair_sums,  # numba only where a2a is priced
        )

        s, n = send.shape[0], send.shape[1]
        classes = self.classes(n)
        depth = self.depth(n, gpn, classes)
        small = self.protocol is not None and self.on.size_efficiency
        threshold, share = ((float(self.protocol.threshold), self.protocol.small_share)
                            if small and self.protocol is not None else (-1.0, 1.0))
        rail = self.rail_groups(n) if self.pxn else np.zeros(0, dtype=np.int64)
        sums = pair_sums(send, depth, len(classes), threshold, share, rail,
                         int(rail.max()) + 1 if rail.size else 0)
        zero = np.zeros((s, n))
        send_s, recv, out, into = zero, zero, zero, zero
        for k, (_, scale) in enumerate(classes):
            terms = (self.class_terms(sums, k, scale, n, gpn) if self.is_linear
                     else self.message_terms(np.where(depth >= k, send, 0.0), scale, n, gpn))
            sent, got, o, i = terms
            if k:  # a spine bottleneck: the leaf's uplinks, shared by its ranks
                sent, got = self.leaves.leaf_mean(sent), self.leaves.leaf_mean(got)
            else:  # the node's NICs; its spine share is the leaf's (above)
                out, into = o, i
            send_s, recv = np.maximum(send_s, sent), np.maximum(recv, got)
        hop = self.pxn_hop(sums[4]) if self.pxn else zero
        busiest = self.finish((send_s, recv, out, into, hop), gpn)
        return np.where(sums[2][0].any(axis=1), self.once + busiest, 0.0)

    def depth(self, n: int, gpn: int, classes: list[tuple[np.ndarray | None, float]]
              ) -> np.ndarray:
        """[n, n] the deepest rate class of each cross-node pair (-1 on one node): the
        classes are nested (:meth:`classes`), so a pair's count of later masks is it."""
        node = np.arange(n) // gpn
        depth = np.zeros((n, n), dtype=np.int64)
        for mask, _ in classes[1:]:
            depth += mask if mask is not None else 1
        return np.where(node[:, None] == node[None, :], -1, depth)

    def rail_groups(self, n: int) -> np.ndarray:
        """[n] each rank's rail group as a destination: consecutive local GPUs of one rail
        form a group, numbered from 0 (:meth:`pxn_hop`)."""
        rail = self.leaves.rails(self.leaves.gpn)  # by local index
        group = np.cumsum(np.r_[True, rail[1:] != rail[:-1]]) - 1
        return group[np.arange(n) % self.leaves.gpn].astype(np.int64)

    def class_terms(
        self, sums: tuple[np.ndarray, ...], k: int, scale: float, n: int, gpn: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """One bottleneck's per-rank send and receive seconds and node-share out and in
        seconds (``[S, n]`` each) in closed form (one regime, no small-message term): alpha
        per message plus wire bytes over the rate, from class ``k``'s sums."""
        rows, cols, sent_n, got_n = (part[k] for part in sums[:4])
        piece = self.curve.pieces[0]
        alpha = (piece.alpha_step if self.on.per_peer else 0.0) + self.qp_miss(n, gpn)
        rank_rate = self.nic_bw * scale * piece.eta
        node_rate = self.node_bw * scale * piece.eta
        sent = alpha * sent_n + rows / rank_rate
        got = alpha * got_n + cols / rank_rate
        return sent, got, rows / node_rate, cols / node_rate

    def message_terms(
        self, inter: np.ndarray, scale: float, n: int, gpn: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`class_terms` for a curve of several regimes or a small-message term: each
        message of ``inter`` (bytes, 0 outside the class) timed on its own."""
        w = self.moved(inter)
        held = inter > 0
        steps = 1 if self.on.per_peer else 0
        gap = self.qp_miss(n, gpn)
        per_msg = np.where(held, self.curve.seconds(w, self.nic_bw * scale, steps) + gap, 0.0)
        at_node = np.where(held, self.curve.seconds(w, self.node_bw * scale, 0), 0.0)
        return per_msg.sum(2), per_msg.sum(1), at_node.sum(2), at_node.sum(1)

    def pxn_hop(self, by_rail: Floats) -> Floats:
        """[S, n] NVLink seconds of PXN's extra hop from each sender's cross-node bytes per
        destination rail group (``[S, n, groups]``, :meth:`rail_groups`): a rank's cross-rail
        bytes out, and what the proxy (the node's GPU on the destination's rail) forwards
        for its node-mates in."""
        n = by_rail.shape[1]
        gpn = self.leaves.gpn
        rail = self.leaves.rails(gpn)  # by local index: consecutive GPUs share a rail
        starts = np.flatnonzero(np.r_[True, rail[1:] != rail[:-1]])
        own = self.leaves.rails(n)[:, None] == rail[starts][None, :]
        off = np.where(own, 0.0, by_rail)  # the sender's own rail needs no hop
        out = off.sum(2)
        forwarded = per_node_rows(off, gpn)  # [S, node, rail]
        per_rail = np.diff(np.r_[starts, gpn])  # a rail's GPUs share its forwarding
        proxy_in = (forwarded / per_rail).max(axis=(1, 2))
        result: Floats = np.maximum(out, proxy_in[:, None]) / self.hop_bw
        return result

    def finish(self, terms: Terms, gpn: int) -> Floats:
        """The busiest resource per matrix: a rank's NIC out or (with incast) in, its node's
        shared NICs, PXN's NVLink hop."""
        send, recv, out, into, hop = terms
        busiest = send.max(1)
        nodes = per_node(out, gpn).max(1)
        if self.on.incast:
            busiest = np.maximum(busiest, recv.max(1))
            nodes = np.maximum(nodes, per_node(into, gpn).max(1))
        result: Floats = np.maximum(np.maximum(busiest, nodes), hop.max(1))
        return result

    def uniform(self, n: int, gpn: int, per_peer: np.ndarray) -> np.ndarray:
        """:meth:`stack` for ``per_peer`` bytes between every pair of ranks on different
        nodes, ``gpn`` ranks per node, at each size (closed form: per rank, the count of its
        messages in each rate class times one message's time)."""
        p = np.asarray(per_peer, dtype=np.float64).reshape(-1)
        if n - min(n, gpn) == 0:
            return np.zeros_like(p)
        node = np.arange(n) // gpn
        remote = n - np.bincount(node)[node]  # a rank's peers outside its node
        # Only bottlenecks below the NIC need the n x n pair masks.
        cross = node[:, None] != node[None, :] if len(classes := self.classes(n)) > 1 else None
        gap = self.qp_miss(n, gpn)
        send = np.zeros((p.size, n))
        out = np.zeros((p.size, n))
        for k, (mask, scale) in enumerate(classes):
            count = remote if mask is None or cross is None else (cross & mask).sum(1)
            sent = count * self.message(p, self.nic_bw * scale, gap)[:, None]
            if k:  # a spine bottleneck: the leaf's (stack)
                sent = self.leaves.leaf_mean(sent)
            else:
                out = count * self.nodal(p, self.node_bw * scale)[:, None]
            send = np.maximum(send, sent)
        hop = np.zeros_like(send)
        if self.pxn:
            rail = self.leaves.rails(n)
            nics = self.leaves.nics
            in_node = np.bincount(node * nics + rail, minlength=(node.max() + 1) * nics)
            same_rail = np.bincount(rail, minlength=nics)[rail] - in_node[node * nics + rail]
            hop = (remote - same_rail) * p[:, None] / self.hop_bw
        # Every rank sends and receives alike: the receive terms equal the send terms.
        busiest = self.finish((send, send, out, out, hop), gpn)
        return np.where(p > 0, self.once + busiest, 0.0)

    def breakdown(self, n: int, gpn: int, per_peer: float) -> dict[str, object]:
        """``cost --json``: each mechanism of a uniform all-to-all of ``per_peer`` bytes per
        pair, named with what it costs (seconds), the rate it runs at (GB/s) or its share."""
        peers = n - min(n, gpn)
        p = np.array([float(per_peer)])
        node = np.arange(n) // gpn
        cross = node[:, None] != node[None, :]
        rails = self.leaves.rails(n)
        off_rail = cross & (rails[:, None] != rails[None, :])
        spine = float((cross & ~self.leaves.local(n, self.pxn)).sum() / cross.sum())
        moving = float(self.curve.seconds(self.moved(p), self.nic_bw, 0)[0])
        gap = self.qp_miss(n, gpn)
        return {
            "remote_peers": peers,
            "message_bytes": float(per_peer),
            "message_size_efficiency": float(per_peer / (self.nic_bw * max(moving, 1e-300))),
            "protocol": self.message_protocol(float(per_peer)),
            "per_peer_latency_s": peers * (self.curve.pieces[0].alpha_step + gap)
            if self.on.per_peer else 0.0,
            "qp_miss_per_message_s": gap,
            "connections_per_nic": peers * CHANNELS_PER_NET_PEER
            * min(gpn, max(1, -(-self.leaves.gpus_per_node // self.leaves.nics))),
            "once_latency_s": self.once,
            "one_nic_per_gpu_gbs": self.nic_bw / 1e9,
            "node_nics_gbs": self.node_bw / 1e9,
            "node_share_s": float(min(n, gpn) * peers * self.nodal(p, self.node_bw)[0]),
            "pxn": {"on": self.pxn,
                    "rerouted_share": float(off_rail.sum() / cross.sum()) if self.pxn else 0.0},
            "incast": "hottest receiver decides" if self.on.incast else "off",
            "incast_share": self.fan_in,
            "spine_share": spine,
            "ecmp": {"factor": self.ecmp,
                     "source": "fast: busiest uplink over its fair share, balls into bins "
                               "(hardware/collectives/ecmp.py; 1: no spine traffic or uplink "
                               "headroom); "
                               "detailed: a seeded hash per flow (network.ecmp_seed, "
                               "ecmp_samples; routing: spray is the ideal)"},
            "seconds": float(self.uniform(n, gpn, p)[0]),
        }

    def message_protocol(self, m: float) -> str:
        if self.protocol is None:
            return "measured curve"
        small = self.on.size_efficiency and m <= self.protocol.threshold
        return "LL" if small else "Simple"


def per_node_rows(values: Floats, gpn: int) -> Floats:
    """``[S, nodes, k]`` sums over consecutive ranks of ``values[S, n, k]`` (padded)."""
    s, n, k = values.shape
    pad = -n % gpn
    if pad:
        values = np.concatenate([values, np.zeros((s, pad, k))], axis=1)
    result: Floats = values.reshape(s, -1, gpn, k).sum(axis=2)
    return result


def per_node(rank_values: Floats, gpn: int) -> Floats:
    """``[S, nodes]`` sums of consecutive ranks (a partial last node padded with zeros)."""
    s, n = rank_values.shape
    pad = -n % gpn
    if pad:
        rank_values = np.concatenate([rank_values, np.zeros((s, pad))], axis=1)
    result: Floats = rank_values.reshape(s, -1, gpn).sum(axis=2)
    return result
