"""The noisy predictor's miss replacement in plain numpy (``libra_des.workload.predictors``
places each round's draws with ``miss_kernel``; tests/test_moe_exact_paths.py compares)."""

from __future__ import annotations

import numpy as np

from libra_des.workload.predictors import REJECTION_ROUNDS, ExpertSets, draw_free


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
