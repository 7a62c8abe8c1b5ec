"""TAP's greedy placement in plain Python, touching only the workers that stand out.

The same greedy as ``tap.greedy_reference`` (docs/model.md part A), with the same tie-breaks,
so placements are identical; it is the uncompiled path for small and medium pools (a
``libra-des plan`` replay places a 512-tile pool on 64 workers, where numpy's per-call cost
on 64-element arrays dominates the reference).

Why it can skip most workers: Δcomm of tile t on worker w is Σ_{g in K(t)} missing[g, w] ·
V_token + V_Q + V_O (no V_Q + V_O on the Q-home). A worker that holds no piece of any g in K(t)
and has fetched none of them lacks every group in full, so its Δcomm is the same default value
D0 for all such workers. The exceptions are few: the workers holding pieces of K(t)'s samples
(their CP shards), those that fetched one, and the Q-home. So per tile:

* the exceptions get their exact Δcomm from per-group dicts ``worker -> tokens missing``;
* among the others, the best by (Δcomm, load, id) is the first worker not excepted in a list
  kept sorted by (load, id), and it is a candidate iff its load fits (it has the least load);
* with no candidate at all, the fallback order (load, Δcomm, id) only looks at the workers
  sharing the least load.

Exactness: all arithmetic is on Python ints. The capacity tests compare ints with floats
exactly in Python, while the reference compares int64 loads converted to float64; the two
agree while loads stay below 2**53, which the caller guarantees (``tap.EXACT_FLOAT_INT``).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from libra_des.plan.tap import TileSet


def group_exceptions(tiles: TileSet) -> tuple[list[int], list[dict[int, int]]]:
    """Per KV group: its token count, and ``worker -> tokens missing`` for its holders."""
    h_count = tiles.heads_split
    glen = np.repeat(tiles.sample_lengths, h_count).tolist()
    exceptions: list[dict[int, int]] = [{} for _ in glen]
    hold = tiles.holdings
    # One holdings row per (sample, worker): a sample lies on one replica, in distinct shards.
    lacking = (tiles.sample_lengths[hold.sample] - hold.tokens).tolist()
    for j, w, m in zip(hold.sample.tolist(), hold.worker.tolist(), lacking, strict=True):
        for g in range(j * h_count, (j + 1) * h_count):
            exceptions[g][w] = m
    return glen, exceptions


class WorkerLoads:
    """Per-worker loads with the workers also kept sorted by (load, id)."""

    def __init__(self, workers: int) -> None:
        self.load = [0] * workers
        self.ranked = [(0, w) for w in range(workers)]

    def add(self, w: int, f: int) -> None:
        old = self.load[w]
        del self.ranked[bisect_left(self.ranked, (old, w))]
        insort(self.ranked, (old + f, w))
        self.load[w] = old + f

    def least_outside(self, skip: dict[int, int]) -> tuple[int, int] | None:
        """(load, id) of the least-loaded worker not in ``skip``; None when all are."""
        for lw in self.ranked:  # a plain loop: next() over a generator took about twice as long
            if lw[1] not in skip:
                return lw
        return None


def greedy_sparse(
    tiles: TileSet, order: np.ndarray, flops: np.ndarray, workers: int, capacity: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(worker per tile, loads, Δcomm per tile): ``greedy_reference``'s result."""
    n = len(tiles)
    glen, exceptions = group_exceptions(tiles)
    loads = WorkerLoads(workers)
    chosen, delta = [0] * n, [0] * n
    ptr, gids = tiles.group_ptr.tolist(), tiles.group_ids.tolist()
    f_list, qh_list = flops.tolist(), tiles.q_home.tolist()
    qo_list = (tiles.q_bytes + tiles.o_bytes).tolist()
    kv_bpt = int(tiles.kv_bytes_per_token)
    load = loads.load
    for t in order.tolist():
        f, home = f_list[t], qh_list[t]
        gs = gids[ptr[t] : ptr[t + 1]]
        if load[home] + f <= capacity and resident(gs, glen, exceptions, home):
            r = home
        else:
            r, delta[t] = choose(gs, glen, exceptions, loads, home, qo_list[t], kv_bpt,
                                 capacity - f)
            for g in gs:
                exceptions[g][r] = 0
        loads.add(r, f)
        chosen[t] = r
    as_int64 = np.int64
    return (np.array(chosen, dtype=as_int64), np.array(load, dtype=as_int64),
            np.array(delta, dtype=as_int64))


def resident(gs: list[int], glen: list[int], exceptions: list[dict[int, int]], w: int) -> bool:
    """Whether worker ``w`` already holds every group of ``gs`` in full."""
    # A plain loop: any() over a generator took about twice as long (hot: once per tile).
    for g in gs:  # noqa: SIM110
        if exceptions[g].get(w, glen[g]):
            return False
    return True


def choose(
    gs: list[int],
    glen: list[int],
    exceptions: list[dict[int, int]],
    loads: WorkerLoads,
    home: int,
    qo: int,
    kv_bpt: int,
    headroom: float,
) -> tuple[int, int]:
    """(worker, its Δcomm): least (Δcomm, load, id) among workers with load <= headroom,
    else least (load, Δcomm, id) over all workers."""
    load = loads.load
    total = 0
    # Tokens each excepted worker lacks, as an offset from lacking every group in full.
    offset: dict[int, int] = {home: 0}
    for g in gs:
        full = glen[g]
        total += full
        for w, m in exceptions[g].items():
            offset[w] = offset.get(w, 0) + m - full
    default = total * kv_bpt + qo
    best: tuple[int, int, int] | None = None
    for w, off in offset.items():
        lw = load[w]
        if lw <= headroom:
            key = ((total + off) * kv_bpt + (0 if w == home else qo), lw, w)
            if best is None or key < best:
                best = key
    other = loads.least_outside(offset)
    if other is not None and other[0] <= headroom:
        key = (default, *other)
        if best is None or key < best:
            best = key
    if best is not None:
        return best[2], best[0]
    special = {w: (total + off) * kv_bpt + (0 if w == home else qo) for w, off in offset.items()}
    least = loads.ranked[0][0]
    tied = []
    for lw, w in loads.ranked:
        if lw != least:
            break
        tied.append((special.get(w, default), w))
    d, w = min(tied)
    return w, d
