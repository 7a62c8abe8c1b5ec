"""TAP's placement, exchange and fold for every pool of a batch in one compiled call.

A step at 131,072 GPUs plans 4,096 pools; each pool's greedy and exchange take about 0.3 ms
in their kernels, and the Python around them (a :class:`~libra_des.plan.tap.TileSet` of
slices, argsort, CSR offsets, a dozen argument conversions a kernel call, the folded
:class:`~libra_des.plan.types.AttentionPlan`'s sums and sparse matrices) about as much again.
:func:`attention_rows` runs that Python's arithmetic here, pool after pool, on the batch's
tile arrays (``tile_batch.TileBatch``, ids batch-global), calling the very kernels the
per-pool planner calls (:func:`tap_kernel.greedy`, :func:`tap_kernel.pair_bytes`,
:func:`tap_kernel.worker_work`) on each pool's slice made pool-local; the per-pool path
(``tap.plan_tiles``) stays the definition and ``tests/test_tile_batch.py`` compares the two
bit for bit.

Every operation repeats the per-pool one's in the same order: the capacity
``(1 + slack) * Σf / W`` in float64; the tile order a stable sort of ``-f`` (a stable sort's
permutation is unique, so numba's merge sort of the blocks, :func:`descending`, gives
numpy's); the document-length division only where the worker has pairs; the nonzero entries
of each byte matrix in row-major order (``np.flatnonzero``'s). The byte matrices come from
:func:`tap_kernel.pair_bytes` without the KV rows the per-pool plan lists (exact integer
sums, so the same bits).
"""

from __future__ import annotations

import numpy as np

from libra_des.base.kernel import Floats, Ints, kernel
from libra_des.plan import tap_kernel


@kernel
def nonzero_into(dense: np.ndarray, flat: np.ndarray, values: np.ndarray, at: int) -> int:
    """Append the nonzero entries of ``dense`` (positions and values, row-major) from ``at``;
    returns the new end."""
    ravel = dense.ravel()
    for i in range(ravel.shape[0]):
        if ravel[i] != 0.0:
            flat[at], values[at] = i, ravel[i]
            at += 1
    return at


@kernel
def local_holdings(sample: np.ndarray, samples: int) -> np.ndarray:
    """CSR offsets of the holdings rows by (pool-local, ascending) sample."""
    ptr = np.zeros(samples + 1, dtype=np.int64)
    for i in range(sample.shape[0]):
        ptr[sample[i] + 1] += 1
    for j in range(samples):
        ptr[j + 1] += ptr[j]
    return ptr


@kernel
def descending(f: np.ndarray, run: int) -> np.ndarray:
    """``np.argsort(-f, kind="stable")``: tile ids by decreasing ``f``, ties by id.

    A block's ``run`` head-shard tiles are consecutive ids with the block's FLOPs
    (``tile_batch``), so where ``f`` is constant over every aligned run the order is the
    runs' own stable order, each run expanded in id order: a sort of ``1 / run`` the length.
    Any other ``f`` is sorted whole.
    """
    n = f.shape[0]
    if run <= 1 or n % run:
        return np.argsort(-f, kind="mergesort")
    for t in range(n):
        if f[t] != f[t - t % run]:
            return np.argsort(-f, kind="mergesort")
    runs = np.argsort(-f[::run], kind="mergesort")
    order = np.empty(n, dtype=np.int64)
    for i in range(runs.shape[0]):
        for h in range(run):
            order[i * run + h] = runs[i] * run + h
    return order


@kernel
def attention_rows(
    flops: Ints, q_home: Ints, q_bytes: Ints, o_bytes: Ints,
    doc_len: Floats, group_ptr: Ints, group_ids: Ints, lengths: Ints,
    hold_sample: Ints, hold_worker: Ints, hold_tokens: Ints,
    pools: Ints, h_count: int, cp: int, kv_bpt: int, slack: float,
) -> tuple[np.ndarray, ...]:
    """Per pool ``p`` (``pools[p]`` = its first sequence, sample, tile and holdings row; one
    more row closes the batch): its workers' pair-heads and document lengths (concatenated,
    pool after pool) and the nonzero dispatch and return bytes (positions ``s * W + d``,
    values, and each pool's first entry).

    Returns (pairs, doc_len, dispatch_ptr, dispatch_flat, dispatch_values, return_ptr,
    return_flat, return_values).
    """
    n = pools.shape[0] - 1
    workers = (pools[1:, 0] - pools[:-1, 0]) * cp
    wide = np.zeros(n + 1, dtype=np.int64)
    for p in range(n):
        wide[p + 1] = wide[p] + workers[p] * workers[p]
    pairs, doc = np.zeros(int(workers.sum())), np.zeros(int(workers.sum()))
    d_ptr, r_ptr = np.zeros(n + 1, dtype=np.int64), np.zeros(n + 1, dtype=np.int64)
    d_flat, r_flat = np.empty(wide[n], dtype=np.int64), np.empty(wide[n], dtype=np.int64)
    d_val, r_val = np.empty(wide[n]), np.empty(wide[n])
    w0 = 0
    for p in range(n):
        s0, j0, t0, r0 = pools[p, 0], pools[p, 1], pools[p, 2], pools[p, 3]
        j1, t1, r1 = pools[p + 1, 1], pools[p + 1, 2], pools[p + 1, 3]
        w, g0 = workers[p], group_ptr[t0]
        f = flops[t0:t1]
        home = q_home[t0:t1] - s0 * cp
        ptr = group_ptr[t0:t1 + 1] - g0
        gids = group_ids[g0:group_ptr[t1]] - j0 * h_count
        glen = np.repeat(lengths[j0:j1], h_count)
        hold_ptr = local_holdings(hold_sample[r0:r1] - j0, j1 - j0)
        hw = hold_worker[r0:r1] - s0 * cp
        ht = hold_tokens[r0:r1]
        capacity = (1.0 + slack) * float(f.sum()) / w
        order = descending(f, h_count)
        chosen, load, _ = tap_kernel.greedy(
            order, f, home, q_bytes[t0:t1] + o_bytes[t0:t1], ptr, gids, glen, h_count,
            hold_ptr, hw, ht, w, kv_bpt, capacity)
        dispatch, ret = tap_kernel.pair_bytes(
            ptr, gids, chosen, (j1 - j0) * h_count, h_count, hold_ptr, hw, ht, kv_bpt, home,
            q_bytes[t0:t1], o_bytes[t0:t1], w)
        weight, sums = tap_kernel.worker_work(chosen, f, doc_len[t0:t1], w)
        for k in range(w):
            pairs[w0 + k] = float(load[k])
            doc[w0 + k] = weight[k] / sums[k] if sums[k] > 0 else 0.0
        w0 += w
        d_ptr[p + 1] = nonzero_into(dispatch, d_flat, d_val, d_ptr[p])
        r_ptr[p + 1] = nonzero_into(ret, r_flat, r_val, r_ptr[p])
    return (pairs, doc, d_ptr, d_flat[:d_ptr[n]].copy(), d_val[:d_ptr[n]].copy(), r_ptr,
            r_flat[:r_ptr[n]].copy(), r_val[:r_ptr[n]].copy())
