"""Compiled (numba) top-k agreement count, equal to ``predictors.topk_agreement``'s.

The reference sorts each row's union of predicted and routed experts (16 ids) and counts
repeats; with distinct ids per row that is the number of predicted ids found among the routed
ones, which the kernel counts directly: each row's routed ids as bits of a few int64 words,
then one bit test per predicted id (no sort, no copies). The count is a whole number, so the
agreement is the same float either way.

Imported lazily, like ``uniform_kernel`` (numba's import is costly); cached on disk.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def topk_hits(predicted: np.ndarray, routed: np.ndarray) -> int:
    """Pairs ``(row, predicted id)`` whose id is among the row's routed ids (ids >= 0)."""
    top = np.int64(0)
    for i in range(routed.shape[0]):
        for c in range(routed.shape[1]):
            if routed[i, c] > top:
                top = np.int64(routed[i, c])
    words = np.zeros((top >> 6) + 1, dtype=np.int64)
    hits = 0
    for i in range(predicted.shape[0]):
        for c in range(routed.shape[1]):
            d = np.int64(routed[i, c])
            words[d >> 6] |= np.int64(1) << (d & 63)
        for a in range(predicted.shape[1]):
            d = np.int64(predicted[i, a])
            if d <= top and (words[d >> 6] >> (d & 63)) & 1:
                hits += 1
        for c in range(routed.shape[1]):
            words[np.int64(routed[i, c]) >> 6] = 0
    return hits
