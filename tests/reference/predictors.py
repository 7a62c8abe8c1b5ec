"""The noisy predictor's miss replacement in plain numpy (``libra_des.workload.predictors``
places the draws row by row with ``miss_kernel``; tests/test_moe_exact_paths.py compares)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from libra_des.workload.miss_kernel import FREE_FLOOR, set_words
from libra_des.workload.predictors import REJECTION_ROUNDS


@dataclass(frozen=True)
class ExpertSets:
    """One set of expert ids per row, as bits of int64 words (64 experts a word), tested and
    grown a whole array of rows at a time."""

    words: np.ndarray  # [rows, ceil(experts / 64)] int64

    @classmethod
    def of(cls, members: np.ndarray, experts: int) -> ExpertSets:
        return cls(set_words(np.asarray(members), -(-experts // 64)))

    def has(self, rows: np.ndarray, expert: np.ndarray) -> np.ndarray:
        return np.asarray((self.words[rows, expert >> 6] >> (expert & 63)) & 1 == 1)

    def add(self, rows: np.ndarray, expert: np.ndarray) -> None:
        """Add ``expert[i]`` to row ``rows[i]`` (rows distinct)."""
        self.words[rows, expert >> 6] |= np.int64(1) << (expert & 63)

    def dense(self, rows: np.ndarray, experts: int) -> np.ndarray:
        """``[len(rows), experts]`` membership table of the given rows."""
        bits = (self.words[rows][:, :, None] >> np.arange(64)) & 1
        return np.asarray(bits.reshape(rows.size, -1)[:, :experts] == 1)


def draw_free(
    rows: np.ndarray, slot: int, weights: np.ndarray, rng: np.random.Generator,
    out: np.ndarray, taken: ExpertSets,
) -> None:
    """The exact draw among each row's free experts, all rows at once: the target is a
    uniform times the running sum's last value (the kernel's total), the pick the first
    expert whose running sum passes it (else the last free one)."""
    free = np.where(taken.dense(rows, weights.size), 0.0, weights[None, :] + FREE_FLOOR)
    run = free.cumsum(1)
    passed = rng.random((rows.size, 1)) * run[:, -1:] < run
    last_free = free.shape[1] - 1 - np.argmax(free[:, ::-1] > 0.0, axis=1)
    pick = np.where(passed.any(axis=1), passed.argmax(axis=1), last_free)
    pick = np.where(free.any(axis=1), pick, out[rows, slot])
    out[rows, slot] = pick
    taken.add(rows, pick)


def replace_misses(
    routed: np.ndarray, miss: np.ndarray, weights: np.ndarray, rng: np.random.Generator,
    substitute: np.ndarray | None = None,
) -> np.ndarray:
    """``predictors.replace_misses`` with a vectorised check-then-add per round."""
    taken = ExpertSets.of(routed, weights.size)
    out = routed.copy()
    cdf = np.cumsum(weights)

    def place(rows: np.ndarray, draw: np.ndarray, slot: int) -> np.ndarray:
        """Place the draws whose expert is free in their row; returns the other rows."""
        clash = taken.has(rows, draw)
        ok = ~clash
        rows_ok, draw_ok = rows[ok], draw[ok]
        out[rows_ok, slot] = draw_ok
        taken.add(rows_ok, draw_ok)
        return rows[clash]

    for slot in range(routed.shape[1]):
        rows = np.flatnonzero(miss[:, slot])
        if substitute is not None and rows.size:
            rows = place(rows, substitute[routed[rows, slot]], slot)
        for _ in range(REJECTION_ROUNDS):
            if rows.size == 0:
                break
            draw = np.minimum(np.searchsorted(cdf, rng.random(rows.size) * cdf[-1]), cdf.size - 1)
            rows = place(rows, draw, slot)
        if rows.size:
            draw_free(rows, slot, weights, rng, out, taken)
    return out
