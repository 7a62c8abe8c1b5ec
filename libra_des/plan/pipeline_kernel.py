"""The Pipeliner's makespan (numba): :func:`tap.pipelined_array` in one pass per element.

The schedule's recurrence runs per element in registers (an array form would make about
5 M passes over memory for every (entity, op, layer, worker) of a step at scale): float64
additions and maxima in the schedule's order, no reassociation (numba does not enable
fast-math unless asked). ``_max`` is ``np.maximum`` for two floats (a NaN in either gives
NaN). tests/test_scale_paths.py compares it with the recurrence written in numpy.
"""

from __future__ import annotations

import numpy as np

from libra_des.base.kernel import Floats, inline_kernel, kernel


@inline_kernel
def _max(a: float, b: float) -> float:
    return a if (a >= b or a != a) else b


@inline_kernel
def makespan_row(c: Floats, dk: float, rk: float, m: int, out: Floats,
                 channel: Floats, ready: Floats, compute_end: Floats) -> None:
    """Makespan of each element of one row ``c[j]`` (compute per chunk) with ``dk``, ``rk``
    per chunk, into ``out`` (``channel``, ``ready``, ``compute_end``: scratch of the row's
    length). Chunk-major, so that the inner loop runs over independent elements (SIMD)
    instead of one element's dependent chain."""
    cols = c.shape[0]
    for j in range(cols):
        channel[j], ready[j], compute_end[j] = dk, dk, c[j] * 0.0
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
            compute_end[j] = start + c[j]
    for j in range(cols):
        out[j] = _max(compute_end[j], channel[j]) + rk


@kernel
def pipelined_rows(c: Floats, d: Floats, r: Floats, m: int) -> Floats:
    """Makespan of ``c[k, j]`` (compute per chunk) with ``d[k]``, ``r[k]`` per chunk, a row
    at a time (:func:`makespan_row`)."""
    rows, cols = c.shape
    out = np.empty((rows, cols))
    channel, ready, compute_end = np.empty(cols), np.empty(cols), np.empty(cols)
    for k in range(rows):
        makespan_row(c[k], d[k], r[k], m, out[k], channel, ready, compute_end)
    return out
