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
def fill_slots(
    miss: np.ndarray, first: int, routed: np.ndarray, substitute: np.ndarray, cdf: np.ndarray,
    rng: np.random.Generator, rounds: int, out: np.ndarray, words: np.ndarray,
    rows: np.ndarray,
) -> tuple[int, int]:
    """Slots ``first, first + 1, ..`` of ``predictors.replace_misses``: each missed row of a
    slot takes its expert's ``substitute`` where free (an empty ``substitute``: none), then up
    to ``rounds`` rejection rounds draw experts by ``cdf`` for the rows still colliding, one
    ``rng.random()`` per row in row order (the numbers of numpy's ``rng.random(n)`` for the
    round's ``n`` rows). Stops after the first slot that leaves rows colliding: returns
    (that slot, how many), the rows at the front of ``rows`` (scratch, as long as a column);
    (slots, 0) when none does. One call for several slots: typing a Generator argument costs
    about 13 us a call."""
    total, last = cdf[-1], cdf.size - 1
    for slot in range(first, miss.shape[1]):
        n = 0
        for r in range(miss.shape[0]):
            if miss[r, slot]:
                rows[n] = r
                n += 1
        if substitute.size and n:
            keep = 0
            for j in range(n):
                if not try_place(rows[j], substitute[routed[rows[j], slot]], slot, out, words):
                    rows[keep] = rows[j]
                    keep += 1
            n = keep
        for _ in range(rounds):
            if n == 0:
                break
            keep = 0
            for j in range(n):
                d = min(np.searchsorted(cdf, rng.random() * total), last)
                if not try_place(rows[j], d, slot, out, words):
                    rows[keep] = rows[j]
                    keep += 1
            n = keep
        if n:
            return slot, n
    return miss.shape[1], 0


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
