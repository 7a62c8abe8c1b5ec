"""Hashed link-load bounds: the busiest link each coflow's flows cross under a routing's
ECMP hash (:mod:`libra_des.hardware.fabric.routing`), over the grown topology's NIC ports
and switch levels, without building routes link by link.
"""

from __future__ import annotations

import numpy as np

from libra_des.hardware.fabric.routing import Routing, flow_hashes
from libra_des.hardware.fabric.topology import Topology


def hashed_bounds(
    topology: Topology, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray,
    routings: tuple[Routing, ...], member: np.ndarray | None = None,
) -> tuple[np.ndarray, bool]:
    """Per routing and per member (``member[i]``: the coflow flow ``i`` belongs to; one
    coflow by default), the bandwidth bound of the member's flows among all of them: the
    seconds the busiest link the member crosses needs to carry *every* flow on it
    (``load / capacity``), over the NIC ports (the same for every hash) and the links between
    switch levels (which the hash picks); and whether any flow crosses a level where the hash
    has a choice. Flows are point-to-point messages on the topology's routes (leaf, then up
    to the lowest level whose unit holds both ends; where the topology relays through PXN, a
    cross-rail flow leaves on its proxy's NIC, of the destination's rail), without building
    them link by link; degraded links and the proxy's NVLink hop are not counted. Shape
    ``[routings, members]``."""
    gpn, nics = topology.gpus_per_node, topology.template.nics
    member = np.zeros(src.size, dtype=np.int64) if member is None else member
    members = int(member.max()) + 1 if member.size else 1
    out = np.zeros((len(routings), members))
    a, b = src // gpn, dst // gpn
    far = a != b
    if not topology.tiers or nics == 0 or not far.any():
        return out, False
    a, b, src, dst, nbytes, member = (x[far] for x in (a, b, src, dst, nbytes, member))
    leaf = topology.tiers[0]
    nic_a, nic_b = (src % gpn) * nics // gpn, (dst % gpn) * nics // gpn
    if topology.pxn:  # Topology.p2p_route: out through the proxy on the destination's rail
        nic_a = nic_b
    ports = np.concatenate([a * nics + nic_a, (b + topology.nodes) * nics + nic_b])
    load = np.bincount(ports, weights=np.concatenate([nbytes, nbytes]))[ports]
    np.maximum.at(out[0], np.concatenate([member, member]), load / leaf.link.bandwidth)
    out[1:] = out[0]
    rail = leaf.spec.type == "rail_leaf"
    low_a = a // leaf.span * leaf.width + (nic_a if rail else 0 * nic_a)
    low_b = b // leaf.span * leaf.width + (nic_b if rail else 0 * nic_b)
    crossed = False
    for s, routing in enumerate(routings):
        h = flow_hashes(src, dst, routing.salt)
        crossed = level_loads(topology, h, (a, b, low_a, low_b), nbytes, member, out[s])
    return out, crossed


def level_loads(
    topology: Topology, h: np.ndarray, ends: tuple[np.ndarray, ...], nbytes: np.ndarray,
    member: np.ndarray, out: np.ndarray,
) -> bool:
    """Raise ``out[member]`` to the busiest inter-switch link's seconds of each member, for
    flows hashed ``h`` between nodes ``a`` and ``b`` whose leaves are ``low_a``, ``low_b``
    (``ends``); whether any flow met a choice (see :func:`hashed_bounds`)."""
    a, b, low_a, low_b = ends
    going = low_a != low_b
    crossed = False
    for tier in topology.tiers[1:]:
        if tier.width == 0 or not going.any():
            break
        crossed |= tier.width > 1
        k = (h % np.uint64(tier.width)).astype(np.int64)
        up_a, up_b = a // tier.span * tier.width + k, b // tier.span * tier.width + k
        size = max(int(low_a.max()), int(low_b.max()), int(up_a.max()), int(up_b.max())) + 1
        codes = np.concatenate([low_a * size + up_a, (low_b * size + up_b) + size * size])
        weights = np.concatenate([nbytes, nbytes]) * np.concatenate([going, going])
        where = np.unique(codes, return_inverse=True)[1]
        seconds = np.bincount(where, weights=weights)[where] / tier.link.bandwidth
        np.maximum.at(out, np.concatenate([member, member]), seconds * np.concatenate(
            [going, going]))
        going = going & (up_a != up_b)
        low_a, low_b = up_a, up_b
    return crossed
