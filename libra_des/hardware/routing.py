"""How a flow between nodes picks its switches: a seeded ECMP hash, or ideal spraying.

Model (each a simplification named on purpose):
- ``ecmp``: a switch that has several equal-cost uplinks picks one by hashing the flow. A flow
  is one (source GPU, destination GPU) pair (one connection: NCCL opens its queue pairs per
  peer); the hash is a 64-bit mix of the pair and a *salt* (:func:`flow_hash`). The salt
  stands for what a real hash sees besides the GPUs (source ports, queue-pair numbers, the
  switch's hash seed), none of which a scenario knows: so the fabric's one hash is one draw of
  a distribution, and each salt is one sample of it. The switch index chosen at a level is
  the same going up and coming down (the topology's routes).
- ``spray``: per-packet spraying, the ideal adaptive routing. Every flow is split evenly over
  all equal-cost paths, so each uplink of a bundle (one switch's links to every switch of the
  level above in its unit, or a whole unit's) carries the same share of what crosses the
  bundle: the bundle behaves as one link of ``members x`` the capacity of its slowest member.
  Routes then name the bundle (:func:`bundle_name`) instead of one switch.

Salts come from the scenario's ``network.ecmp_seed`` through numpy's seed tree
(:func:`ecmp_salts`: sample ``k`` is child ``k`` of ``SeedSequence(ecmp_seed)``), never from
global state; sample 0 is the same whatever the number of samples, so a run with one sample
is the first member of any ensemble with the same seed. The default seed's sample 0 has
salt 0: the fixed hash the topology used before seeds existed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

if TYPE_CHECKING:
    from libra_des.hardware.topology import Topology

#: ``network.ecmp_seed`` when a scenario gives none (our assumption: any fixed value; 0).
DEFAULT_ECMP_SEED = 0

#: Marks a bundle of equal-cost switches in a switch name (``spine*``, ``spine1.*``).
BUNDLE = "*"

MASK = 0xFFFFFFFFFFFFFFFF

RoutingMode = Literal["ecmp", "spray"]


def mix64(x: int) -> int:
    """splitmix64's finaliser: a bijective 64-bit mix (stable across runs and processes)."""
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def flow_hash(src: int, dst: int, salt: int) -> int:
    """The ECMP hash of the flow ``src -> dst`` under ``salt`` (a 64-bit integer)."""
    return mix64((((src * 0x9E3779B97F4A7C15) + dst + 1) & MASK) ^ (salt & MASK))


def child_states(seed: int, samples: int) -> tuple[int, ...]:
    """A 64-bit state of each of the first ``samples`` children of ``SeedSequence(seed)``."""
    children = np.random.SeedSequence(seed).spawn(samples)
    return tuple(int(c.generate_state(1, np.uint64)[0]) for c in children)


def ecmp_salts(seed: int, samples: int) -> tuple[int, ...]:
    """One salt per ECMP sample: child ``k`` of ``SeedSequence(seed)`` for sample ``k``,
    XORed with the default seed's first child. XOR with a constant only relabels the salts
    (the distribution over hashes is the same), and it makes the default route set the
    fixed hash of earlier versions (salt 0), so detailed results without a ``network``
    section are unchanged."""
    offset = child_states(DEFAULT_ECMP_SEED, 1)[0]
    return tuple(state ^ offset for state in child_states(seed, samples))


@dataclass(frozen=True)
class Routing:
    """The route choice of one network: ``mode`` and, for ``ecmp``, the hash's ``salt``."""

    mode: RoutingMode = "ecmp"
    salt: int = 0

    @classmethod
    def sample(cls, mode: RoutingMode, seed: int, k: int = 0) -> Routing:
        """Sample ``k`` of the ECMP seed ``seed`` (spray has no hash: one route set)."""
        if mode == "spray":
            return cls("spray", 0)
        return cls("ecmp", ecmp_salts(seed, k + 1)[k])

    def flow(self, src: int, dst: int) -> int:
        """The flow's hash: at a level of ``width`` switches it takes switch
        ``flow % width`` (0 when spraying, which has one route set)."""
        return 0 if self.mode == "spray" else flow_hash(src, dst, self.salt)


#: What a topology routes with unless told otherwise: sample 0 of the default seed.
DEFAULT_ROUTING = Routing.sample("ecmp", DEFAULT_ECMP_SEED)


def bundle_name(switch: str) -> str:
    """The bundle standing for ``switch``'s level and unit (``spine3`` -> ``spine*``,
    ``spine1.3`` -> ``spine1.*``)."""
    head, dot, _ = switch.rpartition(".")
    if dot:
        return f"{head}.{BUNDLE}"
    return switch.rstrip("0123456789") + BUNDLE


def is_bundle(name: str) -> bool:
    return name.endswith(BUNDLE)


def mix64_array(x: np.ndarray) -> np.ndarray:
    """:func:`mix64` on a uint64 array (numpy's uint64 products wrap, as the masks do)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def flow_hashes(src: np.ndarray, dst: np.ndarray, salt: int) -> np.ndarray:
    """:func:`flow_hash` of every pair at once (uint64)."""
    x = src.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + dst.astype(np.uint64)
    return mix64_array((x + np.uint64(1)) ^ np.uint64(salt & MASK))


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
