"""Compiled (numba) placement rounds of ``predictors.replace_misses``, draw for draw.

A round of the reference draws ``rng.random(n)`` (numpy's float64 uniform of a PCG64 stream:
the next 64-bit output shifted right by 11, times 2**-53), turns each into an expert by
``searchsorted(cdf, u * cdf[-1])`` (first index whose cumulative weight reaches it), and
places the draws whose expert is not yet in their row; the others try again next round. Rows
are distinct within a round and a placement only changes its own row, so placing row by row as
the draws come is the same as the reference's vectorised check-then-add. The kernel runs the
stream's LCG itself (``uniform_kernel``'s arithmetic) and hands the state back, so every later
draw is unchanged; tests/test_moe_exact_paths.py compares it with the reference.

Imported lazily, like ``uniform_kernel`` (numba's import is costly); cached on disk.
"""

from __future__ import annotations

import numba
import numpy as np

from libra_des.workload.uniform_kernel import MULT_HI, MULT_LO, mul_hi

#: numpy's float64 uniform: the top 53 bits of a 64-bit output times 2**-53.
UNIT53 = 1.0 / 9007199254740992.0


@numba.njit(cache=True, nogil=True, inline="always")
def next_double(state: np.ndarray) -> float:
    """The stream's next float64 uniform; ``state`` as ``sampling.pcg_state`` (updated)."""
    s_hi, s_lo, i_hi, i_lo = state[0], state[1], state[2], state[3]
    lo = s_lo * MULT_LO
    hi = mul_hi(s_lo, MULT_LO) + s_lo * MULT_HI + s_hi * MULT_LO
    new_lo = lo + i_lo
    s_hi = hi + i_hi + (np.uint64(1) if new_lo < lo else np.uint64(0))
    s_lo = new_lo
    state[0], state[1] = s_hi, s_lo
    x = s_hi ^ s_lo
    rot = s_hi >> np.uint64(58)
    full = (x >> rot) | (x << ((np.uint64(64) - rot) & np.uint64(63)))
    return float(full >> np.uint64(11)) * UNIT53


@numba.njit(cache=True, nogil=True, inline="always")
def first_reaching(cdf: np.ndarray, x: float) -> int:
    """``numpy.searchsorted(cdf, x)`` (side left) of a non-decreasing ``cdf``."""
    lo, hi = 0, cdf.size
    while lo < hi:
        mid = (lo + hi) >> 1
        if cdf[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


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
def place_drawn(state: np.ndarray, rows: np.ndarray, m: int, cdf: np.ndarray, rounds: int,
                slot: int, out: np.ndarray, words: np.ndarray) -> int:
    """Up to ``rounds`` rejection rounds for the first ``m`` of ``rows``; returns how many
    rows remain (at the front of ``rows``, in order)."""
    total = cdf[-1]
    last = cdf.size - 1
    for _ in range(rounds):
        if m == 0:
            break
        keep = 0
        for j in range(m):
            d = min(first_reaching(cdf, next_double(state) * total), last)
            if not try_place(rows[j], d, slot, out, words):
                rows[keep] = rows[j]
                keep += 1
        m = keep
    return m


@numba.njit(cache=True, nogil=True)
def miss_draws(state: np.ndarray, shape: tuple[int, int], accuracy: float) -> np.ndarray:
    """``rng.random(shape) >= accuracy`` (``NoisyPredictor``'s misses) from the stream's
    float64 uniforms in C order; ``state`` as ``sampling.pcg_state`` (updated)."""
    miss = np.empty(shape, dtype=np.bool_)
    for r in range(shape[0]):
        for c in range(shape[1]):
            miss[r, c] = next_double(state) >= accuracy
    return miss


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
