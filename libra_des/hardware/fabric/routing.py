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
from typing import Literal

import numpy as np
import numpy.typing as npt

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


def mix64_array(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """:func:`mix64` on a uint64 array (numpy's uint64 products wrap, as the masks do)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def flow_hashes(src: np.ndarray, dst: np.ndarray, salt: int) -> np.ndarray:
    """:func:`flow_hash` of every pair at once (uint64)."""
    x = src.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + dst.astype(np.uint64)
    return mix64_array((x + np.uint64(1)) ^ np.uint64(salt & MASK))
