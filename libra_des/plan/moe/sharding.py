"""Libra's token sharding: iterative greedy over remote tokens only (docs/model.md B).

Model: a GPU's load is the number of (token, expert) pairs it computes. Local pairs (the
token's own GPU holds the expert, as home or replica) never move. Every remote pair starts on
the expert's home GPU. Then, while the most-loaded GPU is above ``mean * (1 + tolerance)``:
take its expert with the most movable pairs and move pairs to the least-loaded other GPU
holding that expert, at most half the load gap, so the maximum never rises; if that expert
cannot help, try the next; stop when no move helps. One move is one iteration.

:func:`greedy_moves` is the shared engine; HarMoEny calls it with every pair movable and every
GPU a receiver. Across nodes (``node`` given) a move prefers the least-loaded holder on the
source's node, and crosses to another node only when no holder there can take pairs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ShardResult:
    """``load[g, e]`` after the moves and the number of moves (iterations)."""

    load: np.ndarray
    iterations: int


def best_move(
    load: np.ndarray, movable: np.ndarray, receivers: np.ndarray, loads: np.ndarray, src: int,
    node: np.ndarray | None = None,
) -> tuple[int, int, int] | None:
    """(expert, destination, pairs) of the first helpful move off GPU ``src``, or None."""
    others = np.arange(load.shape[0]) != src
    for e in np.argsort(-movable[src], kind="stable"):
        if movable[src, e] <= 0:
            return None
        ok = receivers[:, e] & others
        if not ok.any():
            continue
        tiers = [ok & (node == node[src]), ok] if node is not None else [ok]
        for cand in tiers:
            if not cand.any():
                continue
            dst = int(np.argmin(np.where(cand, loads, np.iinfo(np.int64).max)))
            amount = int(min(movable[src, e], (loads[src] - loads[dst]) // 2))
            if amount > 0:
                return int(e), dst, amount
    return None


def greedy_moves(
    load: np.ndarray,
    movable: np.ndarray,
    receivers: np.ndarray,
    tolerance: float,
    max_iterations: int | None = None,
    node: np.ndarray | None = None,
    compiled: bool = False,
) -> ShardResult:
    """Move pairs from the most- to the least-loaded eligible GPU until balanced or stuck
    (``compiled``: the loop runs in ``kernel``, with the same moves)."""
    load = load.astype(np.int64).copy()
    movable = movable.astype(np.int64).copy()
    loads = load.sum(axis=1)
    target = loads.mean() * (1.0 + tolerance)
    if compiled:
        from libra_des.plan.moe import kernel  # lazy: numba's import is costly

        moves = kernel.greedy_moves(load, movable, np.asarray(receivers, dtype=np.bool_),
                                    float(target), -1 if max_iterations is None
                                    else max_iterations,
                                    np.empty(0, dtype=np.int64) if node is None else node)
        return ShardResult(load, int(moves))
    iterations = 0
    while max_iterations is None or iterations < max_iterations:
        src = int(np.argmax(loads))
        if loads[src] <= target:
            break
        move = best_move(load, movable, receivers, loads, src, node)
        if move is None:
            break
        e, dst, amount = move
        load[src, e] -= amount
        load[dst, e] += amount
        movable[src, e] -= amount
        loads[src] -= amount
        loads[dst] += amount
        iterations += 1
    return ShardResult(load, iterations)


def initial_load(counts: np.ndarray, holders: np.ndarray, home: np.ndarray) -> np.ndarray:
    """Local pairs where they are; every remote pair on its expert's home GPU."""
    local = counts * holders
    remote = (counts * ~holders).sum(axis=0)
    return np.asarray(local + home * remote[None, :])


def shard_remote_tokens(
    counts: np.ndarray,
    holders: np.ndarray,
    home: np.ndarray,
    tolerance: float = 0.01,
    max_iterations: int | None = None,
    node: np.ndarray | None = None,
    compiled: bool = False,
) -> ShardResult:
    """Libra's sharding of the remote pairs of ``counts[origin, expert]`` over ``holders``."""
    start = initial_load(counts, holders, home)
    movable = start - counts * holders
    return greedy_moves(start, movable, holders, tolerance, max_iterations, node, compiled)
