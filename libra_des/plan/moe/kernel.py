"""The MoE planners' hot loops (numba kernels; tests/reference/moe.py holds numpy forms).

* :func:`origin_counts` is ``assignment.origin_counts`` (one pass over the pairs instead of
  a flat index array and ``bincount``).
* :func:`dispatch_pairs` is ``assignment.dispatch_matrix(assignment.materialise(...))``
  before the multiplication by the token's bytes: the tokens each GPU sends to each other
  GPU. The destination of a pair is found without sorting: in (expert, origin, token) order
  the first ``min(count, load)`` pairs of an (origin, expert) run stay home and the expert's
  spilled pairs fill its GPUs' residual demand in GPU order, so a pair's destination follows
  from its rank inside its run (counted in token order) and where the run's spills start in
  the expert's list of receiving GPUs; each token's distinct remote destinations are then
  counted once.
* :func:`hottest_replicas` is the phase-2 loop of ``replication.libra_replicas`` (repeated
  ``place_hottest``). Its only non-integer arithmetic is the planning load model: each
  expert's remote pairs divided by its holder count, and a GPU's load as its integer local
  pairs plus the sum of its shares (added in expert order).
* :func:`greedy_moves` is ``sharding.greedy_moves`` (integer loads; the stop target is
  computed by the caller with numpy).

Tie-breaks are the reference's: ``argmax`` / ``argmin`` take the first index, ``argsort``
is stable (mergesort) on the negated row. tests/test_moe_kernel.py compares every kernel
with its numpy form on random inputs. Compiled functions are cached on disk (``cache=True``,
see ``base.kernel``).
"""

from __future__ import annotations

import numpy as np

from libra_des.base.kernel import Bools, Int16s, Ints, kernel

#: Largest EP group whose per-token destinations are kept as bits of one int64 word.
MASK_GPUS = 63


@kernel
def origin_counts(routed: Int16s, origin: Ints, gpus: int, experts: int) -> Ints:
    """``[G, E]`` pairs per (origin GPU, expert)."""
    out = np.zeros((gpus, experts), dtype=np.int64)
    tokens, k = routed.shape
    for t in range(tokens):
        o = origin[t]
        for j in range(k):
            out[o, routed[t, j]] += 1
    return out


@kernel
def dispatch_pairs(
    routed: Int16s, origin: Ints, load: Ints, counts: Ints
) -> np.ndarray:
    """``[G, G]`` tokens GPU ``s`` sends to ``d != s`` when ``load`` is realised as in
    ``assignment.materialise`` (``counts``: the routing's origin counts; conserved per
    expert, which the caller checks)."""
    gpus, experts = load.shape
    keep = np.minimum(counts, load)
    # The GPUs of every expert's spilled pairs in spill order (expert-major runs of GPU ids,
    # each GPU repeated by its residual demand), and where each (origin, expert) run's
    # spills start in it.
    spill_at = np.zeros((gpus, experts), dtype=np.int64)
    total = 0
    for e in range(experts):
        for g in range(gpus):
            total += load[g, e] - keep[g, e]
    spill_gpu = np.zeros(total + 1, dtype=np.int16)  # one spare: read, never used
    at = 0
    for e in range(experts):
        run = at
        for g in range(gpus):
            spill_at[g, e] = run
            run += counts[g, e] - keep[g, e]
            for _ in range(load[g, e] - keep[g, e]):
                spill_gpu[at] = g
                at += 1
    rank = np.zeros((gpus, experts), dtype=np.int64)
    pairs = np.zeros((gpus, gpus), dtype=np.int64)
    tokens, k = routed.shape
    if gpus > MASK_GPUS:
        seen = np.full(gpus, -1, dtype=np.int64)
        for t in range(tokens):
            o = origin[t]
            for j in range(k):
                e = routed[t, j]
                r = rank[o, e] - keep[o, e]
                rank[o, e] += 1
                if r < 0:
                    continue  # stays on its origin GPU: nothing to send
                d = spill_gpu[spill_at[o, e] + r]
                if d != o and seen[d] != t:  # once per token and destination
                    seen[d] = t
                    pairs[o, d] += 1
        return pairs
    # A token's destinations as bits of one word (branch-free: the pairs that stay name the
    # origin, which is cleared last).
    one = np.int64(1)
    for t in range(tokens):
        o = origin[t]
        mask = np.int64(0)
        for j in range(k):
            e = routed[t, j]
            r = rank[o, e] - keep[o, e]
            rank[o, e] += 1
            d = spill_gpu[spill_at[o, e] + max(r, 0)]
            mask |= one << (o if r < 0 else d)
        mask &= ~(one << o)
        for d in range(gpus):
            pairs[o, d] += (mask >> d) & one
    return pairs


@kernel
def planned_loads(counts: Ints, holders: Bools) -> tuple[np.ndarray, np.ndarray]:
    """``(share[G, E], loads[G])`` of ``replication.planned_share`` / ``planned_gpu_load``."""
    gpus, experts = counts.shape
    share = np.zeros((gpus, experts), dtype=np.float64)
    for e in range(experts):
        remote = 0
        copies = 0
        for g in range(gpus):
            if holders[g, e]:
                copies += 1
            else:
                remote += counts[g, e]
        per_holder = remote / max(copies, 1)
        for g in range(gpus):
            if holders[g, e]:
                share[g, e] = per_holder
    loads = np.empty(gpus, dtype=np.float64)
    for g in range(gpus):
        local = 0
        for e in range(experts):
            if holders[g, e]:
                local += counts[g, e]
        shares = 0.0
        for e in range(experts):
            shares += share[g, e]
        loads[g] = np.float64(local) + shares
    return share, loads


@kernel
def hottest_replicas(
    counts: Ints, holders: Bools, replicas: Bools, free: Ints,
    node: Ints, home_gpu: Ints,
) -> None:
    """Phase 2 of ``replication.libra_replicas`` in place on ``holders``, ``replicas`` and
    ``free``: ``place_hottest`` until no slot is free or no step helps. ``node``: node of
    every GPU, or an empty array when the group is one node; ``home_gpu[e]``: expert ``e``'s
    home GPU."""
    gpus = counts.shape[0]
    by_node = node.size > 0
    ok = np.empty(gpus, dtype=np.bool_)
    while True:
        if not (free > 0).any():
            return
        share, loads = planned_loads(counts, holders)
        src = np.argmax(loads)
        row = share[src]
        placed = False
        for e in np.argsort(-row, kind="mergesort"):
            if row[e] <= 0:
                return
            for g in range(gpus):
                ok[g] = free[g] > 0 and not holders[g, e]
            if by_node:
                home_node = node[home_gpu[e]]
                near = False
                for g in range(gpus):
                    if ok[g] and node[g] == home_node:
                        near = True
                if near:
                    for g in range(gpus):
                        ok[g] = ok[g] and node[g] == home_node
            dst = -1
            for g in range(gpus):
                if ok[g] and (dst < 0 or loads[g] < loads[dst]):
                    dst = g
            if dst >= 0:
                replicas[dst, e] = True
                holders[dst, e] = True
                free[dst] -= 1
                placed = True
                break
        if not placed:
            return


@kernel
def greedy_moves(
    load: Ints, movable: Ints, receivers: Bools, target: float,
    max_iterations: int, node: Ints,
) -> int:
    """``sharding.greedy_moves`` in place on int64 ``load`` and ``movable``; returns the
    moves made. ``max_iterations`` < 0: no limit; ``node`` empty: one node."""
    gpus, experts = load.shape
    by_node = node.size > 0
    loads = np.zeros(gpus, dtype=np.int64)
    for g in range(gpus):
        for e in range(experts):
            loads[g] += load[g, e]
    iterations = 0
    while max_iterations < 0 or iterations < max_iterations:
        src = np.argmax(loads)
        if loads[src] <= target:
            break
        found = False
        e_move, dst_move, amount_move = 0, 0, 0
        for e in np.argsort(-movable[src], kind="mergesort"):
            if movable[src, e] <= 0:
                break
            for tier in range(2 if by_node else 1):
                dst = -1
                for g in range(gpus):
                    if g == src or not receivers[g, e]:
                        continue
                    if by_node and tier == 0 and node[g] != node[src]:
                        continue
                    if dst < 0 or loads[g] < loads[dst]:
                        dst = g
                if dst < 0:
                    continue
                amount = min(movable[src, e], (loads[src] - loads[dst]) // 2)
                if amount > 0:
                    e_move, dst_move, amount_move = e, dst, amount
                    found = True
                    break
            if found:
                break
        if not found:
            break
        load[src, e_move] -= amount_move
        load[dst_move, e_move] += amount_move
        movable[src, e_move] -= amount_move
        loads[src] -= amount_move
        loads[dst_move] += amount_move
        iterations += 1
    return iterations
