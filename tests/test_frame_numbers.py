"""A coflow frame's local numbers from the compiled pass equal numpy's unique/searchsorted."""

from __future__ import annotations

import numpy as np
import pytest

from libra_des.sim.network import fluid_kernel


def numpy_numbers(
    every: np.ndarray, plinks: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    paths, local = np.unique(every, return_inverse=True)
    rows = plinks[paths]
    links = np.unique(rows[rows >= 0])
    return paths, local, links, np.where(rows >= 0, np.searchsorted(links, np.maximum(rows, 0)),
                                         -1)


@pytest.mark.parametrize("seed", range(6))
def test_frame_numbers_equal_numpys(seed: int) -> None:
    rng = np.random.default_rng(seed)
    paths, width, links = int(rng.integers(1, 60)), int(rng.integers(1, 6)), 200
    plinks = np.full((paths, width), -1, dtype=np.int64)
    pn = rng.integers(0, width + 1, paths)
    for p in range(paths):  # binding links packed to the left, as FluidState keeps them
        plinks[p, : pn[p]] = rng.choice(links, pn[p], replace=False)
    every = rng.integers(0, paths, int(rng.integers(1, 300)))
    got = fluid_kernel.frame_numbers(every, plinks, pn)
    for a, b in zip(got, numpy_numbers(every, plinks), strict=True):
        assert np.array_equal(a, b)
