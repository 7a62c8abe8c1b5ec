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

from libra_des.plan.moe import kernel


@dataclass(frozen=True)
class ShardResult:
    """``load[g, e]`` after the moves and the number of moves (iterations)."""

    load: np.ndarray
    iterations: int


def greedy_moves(
    load: np.ndarray,
    movable: np.ndarray,
    receivers: np.ndarray,
    tolerance: float,
    max_iterations: int | None = None,
    node: np.ndarray | None = None,
) -> ShardResult:
    """Move pairs from the most- to the least-loaded eligible GPU until balanced or stuck
    (the loop runs in ``kernel.greedy_moves``; tests/reference/moe.py holds its numpy form)."""
    load = load.astype(np.int64).copy()
    movable = movable.astype(np.int64).copy()
    loads = load.sum(axis=1)
    target = loads.mean() * (1.0 + tolerance)
    moves = kernel.greedy_moves(load, movable, np.asarray(receivers, dtype=np.bool_),
                                float(target), -1 if max_iterations is None else max_iterations,
                                np.empty(0, dtype=np.int64) if node is None else node)
    return ShardResult(load, int(moves))


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
) -> ShardResult:
    """Libra's sharding of the remote pairs of ``counts[origin, expert]`` over ``holders``."""
    start = initial_load(counts, holders, home)
    movable = start - counts * holders
    return greedy_moves(start, movable, holders, tolerance, max_iterations, node)
