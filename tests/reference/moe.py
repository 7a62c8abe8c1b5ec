"""The MoE planners' loops in plain numpy (``libra_des.plan.moe`` runs them in
``plan.moe.kernel``; tests/test_moe_kernel.py compares the two)."""

from __future__ import annotations

import numpy as np

from libra_des.plan.moe.replication import locality_replicas


def origin_counts(routed: np.ndarray, origin: np.ndarray, gpus: int, experts: int) -> np.ndarray:
    """``[G, E]`` pairs per (origin GPU, expert)."""
    flat = np.asarray(origin, dtype=np.int64)[:, None] * experts + routed
    return np.bincount(flat.ravel(), minlength=gpus * experts).reshape(gpus, experts)


def greedy_moves(
    load: np.ndarray, movable: np.ndarray, receivers: np.ndarray, tolerance: float,
    max_iterations: int | None = None, node: np.ndarray | None = None,
) -> tuple[np.ndarray, int]:
    """``sharding.greedy_moves``: (load after the moves, moves)."""
    load = load.astype(np.int64).copy()
    movable = movable.astype(np.int64).copy()
    loads = load.sum(axis=1)
    target = loads.mean() * (1.0 + tolerance)
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
    return load, iterations


def libra_replicas(
    counts: np.ndarray, home: np.ndarray, slots: int, alpha: float,
    node: np.ndarray | None = None,
) -> np.ndarray:
    """``replication.libra_replicas`` with phase 2 as repeated :func:`place_hottest`."""
    near = counts
    if node is not None:
        home_node = node[np.argmax(home, axis=0)]
        near = np.where(node[:, None] == home_node[None, :], counts, 0)
    replicas = locality_replicas(near, home, round(slots * alpha))
    free = slots - replicas.sum(axis=1)
    holders = home | replicas
    while (free > 0).any():
        step = place_hottest(counts, holders, free, node, home)
        if step is None:
            break
        e, g = step
        replicas[g, e] = holders[g, e] = True
        free[g] -= 1
    return replicas


def planned_share(counts: np.ndarray, holders: np.ndarray) -> np.ndarray:
    """``[G, E]`` remote pairs each holder is expected to take (even split)."""
    remote = (counts * ~holders).sum(axis=0)
    per_holder = remote / np.maximum(holders.sum(axis=0), 1)
    return np.asarray(holders * per_holder[None, :])


def planned_gpu_load(
    counts: np.ndarray, holders: np.ndarray, share: np.ndarray | None = None
) -> np.ndarray:
    """``[G]`` expected pairs per GPU under the planning load model (``share``: the
    :func:`planned_share`, when already computed)."""
    if share is None:
        share = planned_share(counts, holders)
    # Summed in expert order, as the kernel sums (numpy's pairwise sum differs in the last
    # bit, which can flip a tie between two GPUs).
    shared = np.zeros(share.shape[0])
    for e in range(share.shape[1]):
        shared += share[:, e]
    return np.asarray((counts * holders).sum(axis=1) + shared)


def place_hottest(
    counts: np.ndarray, holders: np.ndarray, free: np.ndarray,
    node: np.ndarray | None = None, home: np.ndarray | None = None,
) -> tuple[int, int] | None:
    """Phase-2 step: (expert, GPU) for the next replica, or None when nothing helps."""
    share_all = planned_share(counts, holders)
    loads = planned_gpu_load(counts, holders, share_all)
    src = int(np.argmax(loads))
    share = share_all[src]
    for e in np.argsort(-share, kind="stable"):
        if share[e] <= 0:
            return None
        ok = (free > 0) & ~holders[:, e]
        if node is not None and home is not None:
            near = ok & (node == node[int(np.argmax(home[:, e]))])
            ok = near if near.any() else ok
        if ok.any():
            return int(e), int(np.argmin(np.where(ok, loads, np.inf)))
    return None


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
