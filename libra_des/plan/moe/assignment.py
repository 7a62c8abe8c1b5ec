"""Token-to-GPU assignment of one MoE layer: the plan record and the count helpers.

Planners reason about counts: ``counts[g, e]`` is the number of (token, expert) pairs whose
token lives on GPU ``g`` (its origin: the GPU whose attention produced it) and that route to
expert ``e``; ``load[g, e]`` is how many pairs of expert ``e`` GPU ``g`` computes. A plan is
valid when ``load`` only uses GPUs that hold the expert and conserves every expert's pairs.

:func:`materialise` turns a load matrix back into a per-pair destination (pairs stay on their
origin GPU whenever the plan gives that GPU work on their expert; the rest fill the remaining
demand in token order), from which the dispatch byte matrix follows exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class MoeLayerPlan:
    """Where one layer's expert work runs (``G`` GPUs, ``E`` experts).

    ``holders[g, e]``: GPU ``g`` has expert ``e``'s weights for this layer (home or replica);
    ``replicas[g, e]``: an extra copy occupying a slot (``copied`` if it moved this layer);
    ``load[g, e]`` / ``local[g, e]``: pairs computed on ``g`` / of those, pairs whose token
    originated on ``g`` (they need no dispatch); ``dispatch_bytes[s, d]``: hidden-state bytes
    GPU ``s`` must send to ``d`` (one copy per token and destination GPU), worked out by
    ``dispatch`` on first use (AllGather systems never need it; counting the destinations
    of every pair is the largest part of planning a layer);
    ``copy_bytes[s, d]``: expert-weight bytes copied from ``s`` to ``d`` for this layer;
    ``sharding_iterations``: greedy moves the CPU made; ``cpu_wall_s``: measured wall-clock
    of the CPU planning (``None`` unless timed); ``vectorised_replicas``: replicas the host
    placed in one vectorised step (Libra's phase 1) rather than one per loop iteration.
    """

    policy: str
    holders: np.ndarray
    replicas: np.ndarray
    load: np.ndarray
    local: np.ndarray
    dispatch: Callable[[], np.ndarray] = field(repr=False, compare=False)
    copy_bytes: np.ndarray
    sharding_iterations: int = 0
    cpu_wall_s: float | None = None
    vectorised_replicas: int = 0

    @cached_property
    def dispatch_bytes(self) -> np.ndarray:
        """``[G, G]`` dispatch bytes (computed once, on first use)."""
        return np.asarray(self.dispatch())

    @property
    def gpus(self) -> int:
        return int(self.load.shape[0])

    @property
    def remote(self) -> np.ndarray:
        return np.asarray(self.load - self.local)

    @property
    def gpu_load(self) -> np.ndarray:
        return np.asarray(self.load.sum(axis=1))

    @property
    def load_ratio(self) -> float:
        """R = max GPU load / mean GPU load (1.0 is perfect; the MoE paper quotes R)."""
        loads = self.gpu_load
        mean = float(loads.mean())
        return float(loads.max()) / mean if mean > 0 else 1.0

    @property
    def imbalance(self) -> float:
        """R - 1, the project-wide imbalance (0.0 is perfect)."""
        return self.load_ratio - 1.0

    @property
    def replica_count(self) -> int:
        return int(self.replicas.sum())

    @property
    def replica_pairs(self) -> int:
        """Pairs computed on replica copies (the work the replicas absorbed)."""
        return int((self.load * self.replicas).sum())

    @property
    def wasted_replicas(self) -> int:
        """Replicas that computed no tokens."""
        return int((self.replicas & (self.load == 0)).sum())


def static_home(experts: int, gpus: int) -> np.ndarray:
    """``[G, E]`` contiguous static placement (expert ``e`` on GPU ``e // (E / G)``)."""
    home = np.zeros((gpus, experts), dtype=bool)
    home[np.arange(experts) * gpus // experts, np.arange(experts)] = True
    return home


def origin_counts(routed: np.ndarray, origin: np.ndarray, gpus: int, experts: int) -> np.ndarray:
    """``[G, E]`` pairs per (origin GPU, expert) (``kernel.origin_counts``)."""
    from libra_des.plan.moe import kernel  # the package's __init__ imports this module

    return np.asarray(kernel.origin_counts(routed, np.asarray(origin, dtype=np.int64),
                                           int(gpus), int(experts)))


def split_evenly(totals: np.ndarray, copies: np.ndarray) -> np.ndarray:
    """``[G, E]`` split of each expert's ``totals[e]`` over its copies (integer, remainder to
    the lowest GPUs)."""
    copies = copies.astype(np.int64)
    count = np.maximum(copies.sum(axis=0), 1)
    share = (totals // count)[None, :] * copies
    extra = totals - share.sum(axis=0)
    # Hand the remainder out one pair per copy, in GPU order.
    order = np.cumsum(copies, axis=0) - copies
    share += np.minimum(np.maximum(extra[None, :] - order, 0), copies)
    return np.asarray(share)


def smallest_uint(limit: int) -> type[np.unsignedinteger]:
    """The narrowest unsigned dtype holding ``0 .. limit - 1`` (numpy radix-sorts <= 16 bits)."""
    for dtype in (np.uint8, np.uint16, np.uint32):
        if limit <= np.iinfo(dtype).max + 1:
            return dtype
    return np.uint64


def counting_order(routed: np.ndarray, origin: np.ndarray, gpus: int, experts: int) -> np.ndarray:
    """Flat pair indices of ``routed`` ordered by (expert, origin), ties in token order.

    A stable sort of a narrow key: numpy radix-sorts 8- and 16-bit keys, several times faster
    than its merge sort of wider ones. When origins never decrease along the tokens (DP and
    TP attention both number them so), sorting by expert alone gives the same order.
    """
    e = routed.ravel()
    if origin.size < 2 or bool(np.all(origin[1:] >= origin[:-1])):
        return np.argsort(e.astype(smallest_uint(experts)), kind="stable")
    o = np.repeat(np.asarray(origin, dtype=np.int64), routed.shape[1])
    key = e.astype(np.int64) * gpus + o
    return np.argsort(key.astype(smallest_uint(experts * gpus)), kind="stable")


def materialise(
    routed: np.ndarray, origin: np.ndarray, load: np.ndarray, counts: np.ndarray | None = None
) -> np.ndarray:
    """``[T, k]`` destination GPU of every (token, expert) pair realising ``load``.

    ``counts``: the ``[G, E]`` :func:`origin_counts` of ``routed``, when the caller has them.
    In (expert, origin, token) order the pairs of one (expert, origin) form a run: its first
    ``min(count, load)`` pairs stay home, the rest spill; an expert's spilled pairs, in that
    order, fill its GPUs' residual demand in GPU order. So the destinations in that order are
    runs of repeated GPU ids, and one scatter puts them back in pair order.
    """
    tokens, k = routed.shape
    gpus, experts = load.shape
    if counts is None:
        counts = origin_counts(routed, origin, gpus, experts)
    if not np.array_equal(counts.sum(axis=0), load.sum(axis=0)):
        raise ValueError("load does not conserve the pairs of every expert")
    keep = np.minimum(counts, load)
    stay_spill = np.stack([keep.T.ravel(), (counts - keep).T.ravel()], axis=1).ravel()
    stays = np.repeat(np.tile(np.array([True, False]), experts * gpus), stay_spill)
    gpu_ids = np.tile(np.arange(gpus, dtype=np.int64), experts)  # [E * G], expert-major
    in_order = np.empty(stays.size, dtype=np.int64)
    in_order[stays] = np.repeat(gpu_ids, keep.T.ravel())
    in_order[~stays] = np.repeat(gpu_ids, (load - keep).T.ravel())
    dest = np.empty(stays.size, dtype=np.int64)
    dest[counting_order(routed, np.asarray(origin), gpus, experts)] = in_order
    return dest.reshape(tokens, k)


#: Largest EP group whose per-token destination sets are counted as bit patterns.
BITSET_GPUS = 12


def dispatch_matrix(
    dest: np.ndarray, origin: np.ndarray, gpus: int, token_bytes: float
) -> np.ndarray:
    """``[G, G]`` bytes: each token goes once to every distinct remote GPU it needs."""
    o = np.asarray(origin, dtype=np.int64)
    if gpus > BITSET_GPUS:
        tokens = dest.shape[0]
        need = np.zeros((tokens, gpus), dtype=bool)
        need[np.arange(tokens)[:, None], dest] = True
        need[np.arange(tokens), o] = False
        flat = (o[:, None] * gpus + np.arange(gpus)[None, :])[need]
        pairs = np.bincount(flat, minlength=gpus * gpus).reshape(gpus, gpus)
        return np.asarray(pairs * float(token_bytes))
    # Each token's remote destinations as a bit pattern; count tokens per (origin, pattern),
    # then add each pattern's count to the GPUs it names.
    bits = np.int64(1) << np.asarray(dest, dtype=np.int64)
    need = bits[:, 0].copy()
    for slot in range(1, bits.shape[1]):
        need |= bits[:, slot]
    need &= ~(np.int64(1) << o)
    patterns = 1 << gpus
    per_pattern = np.bincount(o * patterns + need, minlength=gpus * patterns)
    names = (np.arange(patterns)[:, None] >> np.arange(gpus)[None, :]) & 1  # [pattern, GPU]
    pairs = per_pattern.reshape(gpus, patterns) @ names
    return np.asarray(pairs * float(token_bytes))


def copy_matrix(replicas: np.ndarray, home: np.ndarray, expert_bytes: float) -> np.ndarray:
    """``[G, G]`` weight bytes copied from each expert's home GPU to its new replicas."""
    src = np.argmax(home, axis=0)  # home GPU of every expert
    gpus = home.shape[0]
    dst_gpu, expert = np.nonzero(replicas)
    flat = src[expert] * gpus + dst_gpu
    return np.asarray(np.bincount(flat, minlength=gpus * gpus).reshape(gpus, gpus) * expert_bytes)
