"""The top-k agreement count of ``predictors.topk_agreement`` (numba).

With distinct ids per row, the hits are the predicted ids found among the routed ones,
counted directly: each row's routed ids as bits of a few int64 words, then one bit test per
predicted id (no sort, no copies). tests/test_moe_exact_paths.py compares it with a sorted
union count. Compiled functions are cached on disk (``cache=True``).
"""

from __future__ import annotations

import numpy as np

from libra_des.base.kernel import Int16s, Ints, kernel


@kernel
def topk_hits(predicted: Ints, routed: Int16s) -> int:
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
