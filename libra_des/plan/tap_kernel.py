"""Compiled (numba) kernels of TAP: the greedy placement loop of :func:`tap.place`.

The kernel is the same greedy as the pure-Python reference in ``tap.py``, statement by
statement, with the same tie-breaks, so placements are bit-identical:

* integer Δcomm arithmetic in int64 (numpy's wrap-around on overflow is numba's too);
* the capacity tests ``load + f <= C`` and ``load <= C - f`` compare in float64, as numpy does
  for an int64 array against a Python float; the caller only uses the kernel when the pool's
  total FLOPs stay below 2**53, where Python's exact int/float comparison gives the same answer;
* ``choose`` reproduces the reference's masked-minimum semantics (non-candidates read as
  int64 max, lowest worker id among equals).

``tap.py`` imports this module lazily (numba's import costs about 0.25 s, more than a small
run's placements); compiled functions are cached on disk (``cache=True``, next to this file in
``__pycache__``): the first call on a fresh checkout compiles (a few seconds), later processes
load the cache.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, inline="always")
def keys(d: np.ndarray, load: np.ndarray, headroom: float, any_cand: bool, w: int) -> tuple:
    """(primary, secondary) sort key of worker ``w``: the reference's np.where(cand, d, max)
    and load when some worker is a candidate, else load and Δcomm."""
    if any_cand:
        return (d[w] if load[w] <= headroom else np.iinfo(np.int64).max), load[w]
    return load[w], d[w]


@numba.njit(cache=True, nogil=True)
def choose(d: np.ndarray, load: np.ndarray, headroom: float) -> int:
    """argmin (Δcomm, load, id) over workers with load <= headroom, else (load, Δcomm, id)."""
    big = np.iinfo(np.int64).max
    workers = d.shape[0]
    any_cand = False
    for w in range(workers):
        any_cand = any_cand or load[w] <= headroom
    best = big
    for w in range(workers):
        best = min(best, keys(d, load, headroom, any_cand, w)[0])
    count, only = 0, 0
    for w in range(workers):
        if keys(d, load, headroom, any_cand, w)[0] == best:
            count, only = count + 1, w
    if count == 1:
        return only
    # Lowest (secondary, id) among the best; non-best read as int64 max, as in the reference.
    low, arg = big, -1
    for w in range(workers):
        first, second = keys(d, load, headroom, any_cand, w)
        key = second if first == best else big
        if arg < 0 or key < low:
            low, arg = key, w
    return arg


@numba.njit(cache=True, nogil=True)
def greedy(
    order: np.ndarray,
    flops: np.ndarray,
    q_home: np.ndarray,
    qo: np.ndarray,
    ptr: np.ndarray,
    gids: np.ndarray,
    missing: np.ndarray,
    kv_bpt: int,
    capacity: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The reference's loop over tiles in ``order``; mutates ``missing``."""
    n = flops.shape[0]
    workers = missing.shape[1]
    load = np.zeros(workers, dtype=np.int64)
    chosen = np.zeros(n, dtype=np.int64)
    delta = np.zeros(n, dtype=np.int64)
    d = np.zeros(workers, dtype=np.int64)
    for i in range(order.shape[0]):
        t = order[i]
        f, home = flops[t], q_home[t]
        lo, hi = ptr[t], ptr[t + 1]
        if load[home] + f <= capacity:
            resident = True
            for k in range(lo, hi):
                if missing[gids[k], home] != 0:
                    resident = False
                    break
            if resident:
                load[home] += f
                chosen[t] = home
                continue
        d[:] = 0
        for k in range(lo, hi):
            row = gids[k]
            for w in range(workers):
                d[w] += np.int64(missing[row, w])
        q = qo[t]
        for w in range(workers):
            d[w] = d[w] * kv_bpt + q
        d[home] -= q
        r = choose(d, load, capacity - f)
        delta[t] = d[r]
        for k in range(lo, hi):
            missing[gids[k], r] = 0
        load[r] += f
        chosen[t] = r
    return chosen, load, delta
