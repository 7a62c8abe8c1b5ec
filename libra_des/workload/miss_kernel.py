"""The noisy predictor's hot loops (numba): its misses (:func:`mark_misses`) and the miss
replacement of ``predictors.replace_misses`` (:func:`fill_slots`), row by row.

A rejection round places each drawn expert in its row unless the row holds it already; the
others try again next round. Rows are distinct within a round and a placement only changes
its own row, so placing row by row is the same as a vectorised check-then-add (tests/
test_moe_exact_paths.py compares with one, tests/reference/predictors.py). The rows' sets are
bits of int64 words. Compiled functions are cached on disk (``cache=True``, see
``base.kernel``).
"""

from __future__ import annotations

import math

import numpy as np

from libra_des.base.kernel import Bools, Floats, Int16s, Ints, inline_kernel, kernel

#: Added to every free expert's weight in the exact fallback draw, so an expert the
#: popularity weights give (almost) nothing can still be drawn when it is all that is left.
FREE_FLOOR = 1e-12


@inline_kernel
def holds(r: int, d: int, words: Ints) -> bool:
    """Whether row ``r``'s set holds expert ``d``."""
    return bool(words[r, d >> 6] & (np.int64(1) << (d & 63)))


@inline_kernel
def try_place(r: int, d: int, slot: int, out: Int16s, words: Ints) -> bool:
    """Put expert ``d`` in ``out[r, slot]`` unless row ``r`` holds it already."""
    if holds(r, d, words):
        return False
    out[r, slot] = d
    words[r, d >> 6] |= np.int64(1) << (d & 63)
    return True


@kernel
def mark_misses(
    rng: np.random.Generator, routed: Int16s, accuracy: float, counts: Ints
) -> np.ndarray:
    """Which routed experts the predictor misses, each slot independently with probability
    ``1 - accuracy``, and each expert's routed slots added to ``counts``.

    The misses are drawn as the gaps between them, not one uniform per slot: in row-major
    order the number of hits before the next miss is geometric,
    ``floor(log(U) / log(accuracy))`` for ``U`` uniform on (0, 1], the law of a run of
    independent Bernoulli slots. At the paper's accuracies (0.73-0.92) that is one uniform
    and one logarithm per miss instead of one uniform per slot (about 2x faster a layer,
    benchmarks/README.md); tests/test_moe_exact_paths.py tests the law statistically."""
    miss = np.zeros(routed.shape, dtype=np.bool_)
    for r in range(routed.shape[0]):
        for c in range(routed.shape[1]):
            counts[routed[r, c]] += 1
    flat = miss.ravel()
    if not accuracy > 0.0:  # (NaN too: every slot, rather than gaps of no length)
        flat[:] = True
        return miss
    if accuracy >= 1.0:
        return miss
    scale = 1.0 / math.log(accuracy)
    at = -1
    while True:
        # 1 - random() is in (0, 1]: its logarithm is finite and at most 0.
        at += 1 + int(math.log(1.0 - rng.random()) * scale)
        if at >= flat.size:
            return miss
        flat[at] = True


@kernel
def fill_slots(
    miss: Bools, routed: Int16s, substitute: Ints, weights: Floats,
    rng: np.random.Generator, rounds: int, out: Int16s, words: Ints,
) -> None:
    """``predictors.replace_misses`` slot by slot: each missed row of a slot takes its
    expert's ``substitute`` where free (an empty ``substitute``: none), then up to
    ``rounds`` rejection rounds draw experts by ``weights`` for the rows still colliding, then
    :func:`draw_free` for the rows left. One ``rng.random()`` per row in row order: the
    numbers numpy's ``rng.random(n)`` would give each round's ``n`` rows. One call for the
    whole layer: typing a Generator argument costs about 13 us a call."""
    cdf = np.cumsum(weights)
    total, last = cdf[-1], cdf.size - 1
    rows = np.empty(miss.shape[0], dtype=np.int64)
    for slot in range(miss.shape[1]):
        n = 0
        for r in range(miss.shape[0]):
            # Written whether missed or not, counted only if so: a branch taken about one
            # time in nine is mispredicted about as often (a 16,384-token layer's
            # replacement 0.83 -> 0.69 ms, benchmarks/README.md).
            rows[n] = r
            n += miss[r, slot]
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
        for j in range(n):
            draw_free(rows[j], slot, weights, rng, out, words)


@inline_kernel
def draw_free(
    r: int, slot: int, weights: Floats, rng: np.random.Generator, out: Int16s,
    words: Ints,
) -> None:
    """The exact draw among row ``r``'s free experts (a row that kept colliding), with
    probabilities ``weights + FREE_FLOOR`` renormalised over them; their running sum is
    the total. A row with none left (fewer than ``2 * top_k`` experts) keeps the slot's
    routed expert, still in ``out``: a hit rather than a repeated expert."""
    target = rng.random()
    total, pick = 0.0, -1
    for c in range(weights.size):
        if not holds(r, c, words):
            total += weights[c] + FREE_FLOOR
            pick = c  # the last free expert, should rounding put the target past the sum
    if pick < 0:
        return
    target *= total
    run = 0.0
    for c in range(weights.size):
        if not holds(r, c, words):
            run += weights[c] + FREE_FLOOR
            if target < run:
                pick = c
                break
    try_place(r, pick, slot, out, words)


@kernel
def set_words(members: Int16s, n_words: int) -> np.ndarray:
    """Each row of ``members[rows, k]`` as a set: its ids as bits of int64 words (64 ids a
    word)."""
    words = np.zeros((members.shape[0], n_words), dtype=np.int64)
    for r in range(members.shape[0]):
        for c in range(members.shape[1]):
            d = np.int64(members[r, c])
            words[r, d >> 6] |= np.int64(1) << (d & 63)
    return words
