"""The standard normal CDF and quantile (``ndtr``, ``ndtri``) the length laws read.

``ndtr(x) = erfc(-x / sqrt 2) / 2`` (the C library's ``erfc``, through :func:`math.erfc`:
the laws call it on scalars). ``ndtri`` is Wichura's AS 241, compiled
(:mod:`libra_des.workload.normal_kernel`, imported on the first call).
``tests/test_workload.py`` checks both against scipy.special's (within a few ulps) and
against each other (round trips).

Why not scipy.special: it is the only scipy module a short ``libra-des plan`` would load
for itself (benchmarks/README.md).
"""

from __future__ import annotations

import math
from typing import overload

import numpy as np

#: 1 / sqrt(2), rounded once (as the C library's M_SQRT1_2).
SQRT_HALF = math.sqrt(0.5)


def ndtr(x: float) -> float:
    """P(Z <= x) for a standard normal Z."""
    return 0.5 * math.erfc(-x * SQRT_HALF)


@overload
def ndtri(p: float) -> float: ...
@overload
def ndtri(p: np.ndarray) -> np.ndarray: ...
def ndtri(p: float | np.ndarray) -> float | np.ndarray:
    """x with P(Z <= x) = p (AS 241), elementwise; -inf at 0, inf at 1, nan outside [0, 1]."""
    from libra_des.workload.normal_kernel import quantiles  # numba: on first use

    arr = np.asarray(p, dtype=np.float64)
    out = quantiles(np.ascontiguousarray(arr.ravel())).reshape(arr.shape)
    return float(out) if np.ndim(p) == 0 else out
