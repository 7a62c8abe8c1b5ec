"""Compiled (numba) top-k agreement count, equal to ``predictors.topk_agreement``'s.

The reference sorts each row's union of predicted and routed experts (16 ids) and counts
repeats; with distinct ids per row that is the number of predicted ids found among the routed
ones, which the kernel counts directly (``k * k`` comparisons a row, no sort, no copies). The
count is a whole number, so the agreement is the same float either way.

Imported lazily, like ``uniform_kernel`` (numba's import is costly); cached on disk.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def topk_hits(predicted: np.ndarray, routed: np.ndarray) -> int:
    """Pairs ``(row, predicted id)`` whose id is among the row's routed ids."""
    hits = 0
    for i in range(predicted.shape[0]):
        for a in range(predicted.shape[1]):
            want = predicted[i, a]
            for b in range(routed.shape[1]):
                if routed[i, b] == want:
                    hits += 1
                    break
    return hits
