"""Groupings of one GBS window of D packed sequences into K = D/P sequence pools of P each.

Every grouping is a permutation of the window's sequences: no sequence is split, repacked or
moved to another step, so the step's multiset of raw samples is unchanged ("step
equivalence"). Weights are attention-FLOPs proxies F_i = Σ_j l_ij² (docs/model.md A).

Policies: ``random`` (uniform shuffle), ``zigzag`` (snake order by decreasing F),
``zigzag_swap`` (zigzag, then swaps of the heaviest pool's largest sequence while one
lowers that pool without making its partner the new maximum), ``vrsp`` (exact-cardinality LPT).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from libra_des.errors import InputError

GROUPINGS = ("random", "zigzag", "zigzag_swap", "vrsp")


@dataclass(frozen=True)
class Grouping:
    """``pools[k]``: the P sequence indices of pool k; ``loads[k]``: Σ F over that pool."""

    policy: str
    pools: np.ndarray
    loads: np.ndarray

    @property
    def pool_size(self) -> int:
        return int(self.pools.shape[1])

    @property
    def imbalance(self) -> float:
        """R - 1 with R = max pool load / mean pool load."""
        mean = float(self.loads.mean())
        return float(self.loads.max()) / mean - 1.0 if mean > 0 else 0.0

    @property
    def heaviest(self) -> int:
        """Index of the heaviest pool (lowest index on ties)."""
        return int(np.argmax(self.loads))

    def step_order(self) -> np.ndarray:
        """Sequence indices GA-major, pool-minor (VRSP step 6).

        Pools are numbered GA-major already (pool k = GA index k // (DP/P), replicas
        P·(k mod DP/P) ... onwards), so the emitted order is the pools one after another.
        """
        return self.pools.reshape(-1).copy()


def check_window(weights: np.ndarray, pool_size: int) -> np.ndarray:
    """Validate (D, P) and return the weights as float64."""
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or w.size == 0:
        raise InputError("weights", w.shape, "a non-empty 1-D array of per-sequence loads")
    if pool_size <= 0 or w.size % pool_size:
        raise InputError("pool_size", pool_size, f"a positive divisor of gbs={w.size}")
    return w


def decreasing_order(w: np.ndarray) -> np.ndarray:
    """Indices by decreasing weight, ties by increasing index (stable sort of -w)."""
    return np.argsort(-w, kind="stable")


def grouping_of(policy: str, pools: np.ndarray, w: np.ndarray) -> Grouping:
    return Grouping(policy, pools, w[pools].sum(axis=1))


def random_grouping(weights: np.ndarray, pool_size: int, rng: np.random.Generator) -> Grouping:
    """A uniformly random partition into pools of exactly P sequences."""
    w = check_window(weights, pool_size)
    pools = rng.permutation(w.size).reshape(-1, pool_size)
    return grouping_of("random", pools, w)


def zigzag_pools(w: np.ndarray, pool_size: int) -> np.ndarray:
    """Snake order: round r deals the next K heaviest to pools 0..K-1 (r even) or K-1..0."""
    k = w.size // pool_size
    rounds = decreasing_order(w).reshape(pool_size, k)
    rounds[1::2] = rounds[1::2, ::-1]
    return np.ascontiguousarray(rounds.T)


def zigzag(weights: np.ndarray, pool_size: int, rng: np.random.Generator | None = None) -> Grouping:
    """Snake (boustrophedon) dealing by decreasing F; deterministic (``rng`` unused)."""
    w = check_window(weights, pool_size)
    return grouping_of("zigzag", zigzag_pools(w, pool_size), w)


Swap = tuple[int, int, int, int]
SWAP_MOVES = ("largest", "all")


def best_swap(pools: np.ndarray, loads: np.ndarray, w: np.ndarray, moves: str) -> Swap | None:
    """The swap (heaviest pool h, other pool k, slot in h, slot in k) that helps most.

    Moving δ = F_a - F_b out of h into k leaves max(L_h - δ, L_k + δ) for the pair; a swap
    helps only if that is below L_h, i.e. 0 < δ < L_h - L_k. Among helpful swaps the one with
    the smallest pair maximum wins (ties: lowest pool, then slots). ``moves="largest"`` only
    trades away h's largest sequence (the classic "move the straggler's biggest job" rule);
    ``moves="all"`` tries every slot of h (a full pair-swap local search).
    """
    h = int(np.argmax(loads))
    fh = w[pools[h]]
    h_slots = np.arange(fh.size) if moves == "all" else np.array([int(np.argmax(fh))])
    delta = fh[h_slots][None, :, None] - w[pools][:, None, :]  # [K, h slots, P]
    gap = (loads[h] - loads)[:, None, None]
    ok = (delta > 0) & (delta < gap)
    ok[h] = False
    if not ok.any():
        return None
    pair_max = np.maximum(loads[h] - delta, loads[:, None, None] + delta)
    flat = int(np.argmin(np.where(ok, pair_max, np.inf)))
    k, a, b = np.unravel_index(flat, ok.shape)
    return h, int(k), int(h_slots[a]), int(b)


def zigzag_swap(
    weights: np.ndarray,
    pool_size: int,
    rng: np.random.Generator | None = None,
    *,
    moves: str = "largest",
) -> Grouping:
    """Zigzag, then pairwise swaps out of the heaviest pool until none lowers it.

    The default neighbourhood (``moves="largest"``) swaps the heaviest pool's largest
    sequence for a lighter one of another pool, the best such swap first. A full pair-swap
    search (``moves="all"``) is a much stronger local search than the paper's baseline: on
    the shipped corpora it beats VRSP at P >= 4 (see tests/test_grouping.py).
    Each swap strictly lowers the sorted load vector lexicographically, so it terminates; the
    iteration cap is a guard only.
    """
    if moves not in SWAP_MOVES:
        raise InputError("moves", moves, " | ".join(SWAP_MOVES))
    w = check_window(weights, pool_size)
    pools = zigzag_pools(w, pool_size)
    loads = w[pools].sum(axis=1)
    for _ in range(4 * w.size * pool_size):
        swap = best_swap(pools, loads, w, moves)
        if swap is None:
            break
        h, k, a, b = swap
        pools[h, a], pools[k, b] = pools[k, b], pools[h, a]
        # Recompute the two sums (not += δ) so rounding never drifts from w[pools].
        loads[h] = w[pools[h]].sum()
        loads[k] = w[pools[k]].sum()
    return grouping_of("zigzag_swap", pools, w)


def vrsp(weights: np.ndarray, pool_size: int, rng: np.random.Generator | None = None) -> Grouping:
    """VRSP: exact-cardinality LPT, exactly as docs/model.md A (deterministic, ``rng`` unused).

    Sequences by decreasing F (ties by index); a min-heap of (load, pool id) over non-full
    pools; each sequence goes to the lightest pool, which is pushed back only while it holds
    fewer than P sequences. O(D log K).
    """
    w = check_window(weights, pool_size)
    k = w.size // pool_size
    pools = np.empty((k, pool_size), dtype=np.int64)
    fill = [0] * k
    heap = [(0.0, pid) for pid in range(k)]  # already a valid heap: equal loads, ids ascending
    order = decreasing_order(w).tolist()
    values = w.tolist()
    rows = [[0] * pool_size for _ in range(k)]
    for i in order:
        load, pid = heap[0]
        slot = fill[pid]
        rows[pid][slot] = i
        fill[pid] = slot + 1
        if slot + 1 < pool_size:
            heapq.heapreplace(heap, (load + values[i], pid))
        else:
            heapq.heappop(heap)
    pools[:] = rows
    return grouping_of("vrsp", pools, w)


GroupFn = Callable[[np.ndarray, int, np.random.Generator], Grouping]

GROUPERS: dict[str, GroupFn] = {
    "random": random_grouping,
    "zigzag": zigzag,
    "zigzag_swap": zigzag_swap,
    "vrsp": vrsp,
}


def group(policy: str, weights: np.ndarray, pool_size: int, rng: np.random.Generator) -> Grouping:
    """Dispatch to the grouping named ``policy``."""
    fn = GROUPERS.get(policy)
    if fn is None:
        raise InputError("policy", policy, " | ".join(GROUPINGS))
    return fn(weights, pool_size, rng)


def lln_estimate(cv: float, pool_size: int, d: int) -> float:
    """Analytic E[R] - 1 ≈ (CV/√P)·√(2 ln(D/P)) for IID loads (docs/model.md A); 0 when K = 1."""
    if pool_size <= 0 or d < pool_size:
        raise InputError("pool_size", pool_size, f"a positive divisor of gbs={d}")
    k = d / pool_size
    return cv / math.sqrt(pool_size) * math.sqrt(2.0 * math.log(k)) if k > 1 else 0.0
