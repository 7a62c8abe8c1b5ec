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

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class MoeLayerPlan:
    """Where one layer's expert work runs (``G`` GPUs, ``E`` experts).

    ``holders[g, e]``: GPU ``g`` has expert ``e``'s weights for this layer (home or replica);
    ``replicas[g, e]``: an extra copy occupying a slot (``copied`` if it moved this layer);
    ``load[g, e]`` / ``local[g, e]``: pairs computed on ``g`` / of those, pairs whose token
    originated on ``g`` (they need no dispatch); ``dispatch_bytes[s, d]``: hidden-state bytes
    GPU ``s`` must send to ``d`` (one copy per token and destination GPU);
    ``copy_bytes[s, d]``: expert-weight bytes copied from ``s`` to ``d`` for this layer;
    ``sharding_iterations``: greedy moves the CPU made; ``cpu_wall_s``: measured wall-clock
    of the CPU planning (``None`` unless timed).
    """

    policy: str
    holders: np.ndarray
    replicas: np.ndarray
    load: np.ndarray
    local: np.ndarray
    dispatch_bytes: np.ndarray
    copy_bytes: np.ndarray
    sharding_iterations: int = 0
    cpu_wall_s: float | None = None

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
    def imbalance(self) -> float:
        """max GPU load / mean GPU load (1.0 is perfect)."""
        loads = self.gpu_load
        mean = float(loads.mean())
        return float(loads.max()) / mean if mean > 0 else 1.0

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
    """``[G, E]`` pairs per (origin GPU, expert)."""
    o = np.repeat(np.asarray(origin, dtype=np.int64), routed.shape[1])
    flat = o * experts + routed.ravel().astype(np.int64)
    return np.bincount(flat, minlength=gpus * experts).reshape(gpus, experts)


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


def materialise(routed: np.ndarray, origin: np.ndarray, load: np.ndarray) -> np.ndarray:
    """``[T, k]`` destination GPU of every (token, expert) pair realising ``load``."""
    tokens, k = routed.shape
    gpus, experts = load.shape
    e = routed.ravel().astype(np.int64)
    o = np.repeat(np.asarray(origin, dtype=np.int64), k)
    key = e * gpus + o  # expert-major, then origin
    per_key = np.bincount(key, minlength=gpus * experts)
    if not np.array_equal(per_key.reshape(experts, gpus).sum(axis=1), load.sum(axis=0)):
        raise ValueError("load does not conserve the pairs of every expert")
    keep = np.minimum(per_key.reshape(experts, gpus), load.T).ravel()
    # Stable counting order: by key, then token (radix sort on a small int key).
    order = np.argsort(key.astype(np.int32), kind="stable")
    sorted_key = key[order]
    rank = np.arange(key.size) - (np.cumsum(per_key) - per_key)[sorted_key]
    stays = rank < keep[sorted_key]
    dest = np.empty(e.size, dtype=np.int64)
    dest[order[stays]] = o[order[stays]]
    # Spilled pairs of expert e fill the residual demand of its GPUs in GPU order.
    spill = order[~stays]
    e_spill = e[spill]
    per_expert = np.bincount(e_spill, minlength=experts)
    spill_rank = np.arange(spill.size) - (np.cumsum(per_expert) - per_expert)[e_spill]
    demand = np.cumsum(load.T - keep.reshape(experts, gpus), axis=1)  # [E, G]
    big = int(demand[:, -1].max(initial=0)) + 1
    flat = (demand + np.arange(experts)[:, None] * big).ravel()
    dest[spill] = np.searchsorted(flat, spill_rank + e_spill * big, side="right") % gpus
    return dest.reshape(tokens, k)


def dispatch_matrix(
    dest: np.ndarray, origin: np.ndarray, gpus: int, token_bytes: float
) -> np.ndarray:
    """``[G, G]`` bytes: each token goes once to every distinct remote GPU it needs."""
    ordered = np.sort(dest, axis=1)
    first = np.ones_like(ordered, dtype=bool)
    first[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    o = np.broadcast_to(np.asarray(origin, dtype=np.int64)[:, None], ordered.shape)
    need = first & (ordered != o)
    pairs = np.bincount((o * gpus + ordered)[need], minlength=gpus * gpus)
    return np.asarray(pairs.reshape(gpus, gpus) * float(token_bytes))


def copy_matrix(replicas: np.ndarray, home: np.ndarray, expert_bytes: float) -> np.ndarray:
    """``[G, G]`` weight bytes copied from each expert's home GPU to its new replicas."""
    src = np.argmax(home, axis=0)  # home GPU of every expert
    gpus = home.shape[0]
    dst_gpu, expert = np.nonzero(replicas)
    flat = src[expert] * gpus + dst_gpu
    return np.asarray(np.bincount(flat, minlength=gpus * gpus).reshape(gpus, gpus) * expert_bytes)
