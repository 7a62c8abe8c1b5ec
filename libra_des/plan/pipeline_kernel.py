"""The Pipeliner's makespan (numba): :func:`tap.pipelined_array` in one pass per element.

The schedule's recurrence runs per element in registers (an array form would make about
5 M passes over memory for every (entity, op, layer, worker) of a step at scale): float64
additions and maxima in the schedule's order, no reassociation (numba does not enable
fast-math unless asked). ``_max`` is ``np.maximum`` for two floats (a NaN in either gives
NaN). tests/test_scale_paths.py compares it with the recurrence written in numpy.
"""

from __future__ import annotations

import numpy as np

from libra_des.base.startup import numba_module

numba = numba_module()


@numba.njit(cache=True, nogil=True, inline="always")
def _max(a: float, b: float) -> float:
    return a if (a >= b or a != a) else b


@numba.njit(cache=True, nogil=True)
def pipelined_rows(c: np.ndarray, d: np.ndarray, r: np.ndarray, m: int) -> np.ndarray:
    """Makespan of ``c[k, j]`` (compute per chunk) with ``d[k]``, ``r[k]`` per chunk.

    Chunk-major within a row, so that the inner loop runs over independent elements (SIMD)
    instead of one element's dependent chain.
    """
    rows, cols = c.shape
    out = np.empty((rows, cols))
    channel, ready, compute_end = np.empty(cols), np.empty(cols), np.empty(cols)
    for k in range(rows):
        dk, rk = d[k], r[k]
        for j in range(cols):
            channel[j], ready[j], compute_end[j] = dk, dk, c[k, j] * 0.0
        for i in range(m):
            for j in range(cols):
                start = _max(ready[j], compute_end[j])
                ch = channel[j]
                if i + 1 < m:
                    ch = _max(start, ch) + dk
                    ready[j] = ch
                if i >= 1:
                    ch = _max(start, ch) + rk
                channel[j] = ch
                compute_end[j] = start + c[k, j]
        for j in range(cols):
            out[k, j] = _max(compute_end[j], channel[j]) + rk
    return out
