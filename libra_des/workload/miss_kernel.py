"""The placement rounds of ``predictors.replace_misses`` (numba), row by row.

A round places each drawn expert in its row unless the row holds it already; the others try
again next round. Rows are distinct within a round and a placement only changes its own row,
so placing row by row is the same as a vectorised check-then-add (tests/
test_moe_exact_paths.py compares it with one). The rows' sets are bits of int64 words.
Compiled functions are cached on disk (``cache=True``, see ``startup.numba_module``).
"""

from __future__ import annotations

import numpy as np

from libra_des.base.startup import numba_module

numba = numba_module()


@numba.njit(cache=True, nogil=True, inline="always")
def try_place(r: int, d: int, slot: int, out: np.ndarray, words: np.ndarray) -> bool:
    """Put expert ``d`` in ``out[r, slot]`` unless row ``r`` holds it already."""
    bit = np.int64(1) << (d & 63)
    if words[r, d >> 6] & bit:
        return False
    out[r, slot] = d
    words[r, d >> 6] |= bit
    return True


@numba.njit(cache=True, nogil=True)
def place_given(rows: np.ndarray, draws: np.ndarray, slot: int, out: np.ndarray,
                words: np.ndarray) -> int:
    """Place ``draws[j]`` in row ``rows[j]`` where free; the others' rows move to the front of
    ``rows`` (in order); returns how many."""
    keep = 0
    for j in range(rows.size):
        if not try_place(rows[j], draws[j], slot, out, words):
            rows[keep] = rows[j]
            keep += 1
    return keep


@numba.njit(cache=True, nogil=True)
def set_words(members: np.ndarray, n_words: int) -> np.ndarray:
    """``predictors.ExpertSets.of(members, ...).words``: each row's ids as bits of int64
    words (64 ids a word)."""
    words = np.zeros((members.shape[0], n_words), dtype=np.int64)
    for r in range(members.shape[0]):
        for c in range(members.shape[1]):
            d = np.int64(members[r, c])
            words[r, d >> 6] |= np.int64(1) << (d & 63)
    return words
