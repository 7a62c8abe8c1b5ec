"""TAP's planner in plain numpy (``libra_des.plan.tap`` runs
``tap_kernel``; tests/test_tap_kernel.py and test_tile_batch.py compare them).

The greedy here is docs/model.md part A read literally: Δcomm for all workers at once per
tile from a dense [G, W] matrix of the tokens still missing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from libra_des.plan.attention import expand_runs
from libra_des.plan.tap import (
    ExchangePlan,
    Holdings,
    Placement,
    TileSet,
    csr_ptr,
)

_BIG = np.iinfo(np.int64).max
#: float64 represents every integer below this exactly (IEEE 754 double, 53-bit significand).
EXACT_FLOAT_INT = 2**53


def place_reference(tiles: TileSet, workers: int, slack: float) -> Placement:
    """:func:`libra_des.plan.tap.place` with :func:`greedy_reference`."""
    flops = tiles.flops.astype(np.int64)
    total = int(flops.sum())
    assert total < EXACT_FLOAT_INT  # the kernel's float64 capacity tests are exact below
    capacity = (1.0 + slack) * float(total) / workers
    order = np.argsort(-flops, kind="stable")
    missing = missing_tokens(tiles, workers)
    chosen, load, delta = greedy_reference(tiles, order, flops, missing, capacity)
    return Placement(chosen, load, delta, capacity, order)


def exchange_reference(tiles: TileSet, placement: Placement) -> ExchangePlan:
    """:func:`libra_des.plan.tap.exchange_plan` with numpy."""
    workers = int(placement.loads.shape[0])
    hold = tiles.holdings
    hold_ptr = csr_ptr(np.bincount(hold.sample, minlength=tiles.sample_lengths.size))
    kv_group, kv_src, kv_dst, tokens = kv_fetches(tiles, placement.worker, workers, hold_ptr)
    kv_bytes = tokens * tiles.kv_bytes_per_token
    remote = placement.worker != tiles.q_home
    q_src, q_dst = tiles.q_home[remote], placement.worker[remote]
    dispatch = pair_matrix(
        np.concatenate([kv_src, q_src]),
        np.concatenate([kv_dst, q_dst]),
        np.concatenate([kv_bytes, tiles.q_bytes[remote]]),
        workers,
    )
    ret = pair_matrix(q_dst, q_src, tiles.o_bytes[remote], workers)
    return ExchangePlan(kv_group, kv_src, kv_dst, kv_bytes, dispatch, ret)


def missing_tokens(tiles: TileSet, workers: int) -> np.ndarray:
    """[G, W] tokens of group g that worker w lacks before balancing (int32 to save memory)."""
    h_count = tiles.heads_split
    lens = tiles.sample_lengths
    # int32 halves the memory of this [G, W] matrix; token counts of one sample fit easily.
    dtype = np.int32 if lens.size == 0 or lens.max() < 2**31 else np.int64
    cost = np.empty((lens.size * h_count, workers), dtype=dtype)
    cost[:] = np.repeat(lens, h_count).astype(dtype)[:, None]
    hold = tiles.holdings
    rows = (hold.sample[:, None] * h_count + np.arange(h_count)).ravel()
    cols = np.repeat(hold.worker, h_count)
    cost[rows, cols] -= np.repeat(hold.tokens, h_count).astype(dtype)
    return cost



def greedy_reference(
    tiles: TileSet, order: np.ndarray, flops: np.ndarray, missing: np.ndarray, capacity: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The greedy loop in Python (the reference ``tap_kernel.greedy`` is tested against).

    Δcomm for all workers at once per tile: the [G, W] matrix of tokens still missing is
    summed over K(t)'s rows; fetching zeroes the chosen worker's entries. Shortcut with the
    same result: when the Q-home fits and already holds all of K(t), its Δcomm is 0 while
    every other worker pays V_Q + V_O > 0, so it wins without computing the others.
    """
    n, workers = len(tiles), int(missing.shape[1])
    load = np.zeros(workers, dtype=np.int64)
    chosen = np.zeros(n, dtype=np.int64)
    delta = np.zeros(n, dtype=np.int64)
    ptr, gids, kv_bpt = tiles.group_ptr.tolist(), tiles.group_ids, tiles.kv_bytes_per_token
    f_list, qh_list = flops.tolist(), tiles.q_home.tolist()
    qo_list = (tiles.q_bytes + tiles.o_bytes).tolist()
    scalar_load = [0] * workers  # mirror of ``load`` for cheap scalar checks
    for t in order.tolist():
        f, home = f_list[t], qh_list[t]
        gs = gids[ptr[t] : ptr[t + 1]]
        if scalar_load[home] + f <= capacity and not np.count_nonzero(missing[gs, home]):
            r = home
        else:
            d = np.add.reduce(missing[gs], axis=0, dtype=np.int64) * kv_bpt + qo_list[t]
            d[home] -= qo_list[t]
            r = choose(d, load, capacity - f)
            delta[t] = d[r]
            missing[gs, r] = 0
        load[r] += f
        scalar_load[r] += f
        chosen[t] = r
    return chosen, load, delta


def choose(d: np.ndarray, load: np.ndarray, headroom: float) -> int:
    """argmin (Δcomm, load, id) over workers with load <= headroom, else (load, Δcomm, id).

    Written with ufunc reductions and array methods (no numpy Python wrappers): it runs
    once per tile and dominates placement time.
    """
    cand = load <= headroom
    if np.count_nonzero(cand):
        first, second = np.where(cand, d, _BIG), load
    else:
        first, second = load, d
    best = first == np.minimum.reduce(first)
    if np.count_nonzero(best) == 1:
        return int(best.argmax())
    # argmin returns the lowest index among equals: the final tie-break on worker id.
    return int(np.where(best, second, _BIG).argmin())



def kv_fetches(
    tiles: TileSet, worker: np.ndarray, workers: int, hold_ptr: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(group, source, destination, tokens) of the KV pieces moved, with numpy."""
    dest = np.repeat(worker, np.diff(tiles.group_ptr))
    # The sorted distinct (group, destination) keys, as np.unique gives them, by marking a
    # dense table (keys are < groups x workers; cheaper than unique's hash and sort).
    mark = np.zeros(tiles.num_groups * workers, dtype=bool)
    mark[tiles.group_ids * workers + dest] = True
    need = np.flatnonzero(mark)
    need_group, need_dst = need // workers, need % workers
    hold = tiles.holdings
    need_sample = need_group // tiles.heads_split
    row, pos = expand_runs(hold_ptr[need_sample + 1] - hold_ptr[need_sample])
    piece = hold_ptr[need_sample[row]] + pos
    src, dst = hold.worker[piece], need_dst[row]
    keep = src != dst
    return need_group[row][keep], src[keep], dst[keep], hold.tokens[piece][keep]


def pair_matrix(src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray, workers: int) -> np.ndarray:
    """[W, W] bytes from ``src`` to ``dst`` (float64; integer byte counts stay exact)."""
    flat = np.bincount(
        src * workers + dst, weights=nbytes.astype(np.float64), minlength=workers * workers
    )
    return flat.reshape(workers, workers)



def holdings_numpy(seqs: Sequence[np.ndarray], cp: int, packed_length: int) -> Holdings:
    """:func:`libra_des.plan.tap.holdings` with numpy."""
    bounds = np.arange(cp + 1, dtype=np.int64) * packed_length // cp
    lens = np.concatenate(seqs)
    starts = np.concatenate([np.cumsum(s) - s for s in seqs])
    replica = np.repeat(np.arange(len(seqs), dtype=np.int64), [s.size for s in seqs])
    first = np.searchsorted(bounds, starts, side="right") - 1
    last = np.searchsorted(bounds, starts + lens - 1, side="right") - 1
    sample, pos = expand_runs(last - first + 1)
    shard = first[sample] + pos
    lo = np.maximum(bounds[shard], starts[sample])
    hi = np.minimum(bounds[shard + 1], starts[sample] + lens[sample])
    return Holdings(sample, replica[sample] * cp + shard, hi - lo)




def tile_groups_numpy(
    seg_sample: np.ndarray, seg_count: np.ndarray, h_count: int
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`libra_des.plan.tap.tile_groups` with numpy."""
    block_ptr = csr_ptr(seg_count)
    tile_count = np.repeat(seg_count, h_count)
    tile, pos = expand_runs(tile_count)
    sample = seg_sample[block_ptr[tile // h_count] + pos]
    tile_ptr = csr_ptr(tile_count)
    return tile_ptr, sample * h_count + tile % h_count
