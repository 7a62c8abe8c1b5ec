"""Compiled (numba) Pipeliner makespan: :func:`tap.pipelined_array` in one pass per element.

The numpy form runs the schedule's recurrence as about 5 M array operations over every
(entity, op, layer, worker) of a step (millions of elements at scale), each a pass over
memory. This kernel runs the same recurrence per element in registers: the same float64
additions and maxima in the same order, no reassociation (numba does not enable fast-math
unless asked), so the results are bit-identical. ``_max`` is ``np.maximum`` for two floats
(a NaN in either gives NaN).

Used only when numba is already loaded in the process (the compiled TAP placement loads it
at scale): importing numba for this alone would cost more than it saves on a small run.
"""

from __future__ import annotations

import numba
import numpy as np


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
