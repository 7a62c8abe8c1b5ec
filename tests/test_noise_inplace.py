"""Lognormal jitter drawn in place equals the plain formula, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from libra_des.hardware.variance.model import LogNormalNoise


@pytest.mark.parametrize("sigma", [0.0, 0.03, 0.5, 1.7])
@pytest.mark.parametrize("shape", [(5,), (37, 101), (4, 3, 129)])
def test_lognormal_sample_is_the_plain_formula(sigma: float, shape: tuple[int, ...]) -> None:
    z = np.random.default_rng(3).standard_normal(shape)
    want = np.exp(sigma * z - 0.5 * sigma**2)
    got = LogNormalNoise(sigma).sample(np.random.default_rng(3), shape)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got.view(np.int64), want.view(np.int64))
