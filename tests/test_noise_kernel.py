"""The jitter's compiled normal draws against numpy's: the same numbers, the same stream."""

from __future__ import annotations

import numpy as np
import pytest

from libra_des.hardware.noise_kernel import shifted_normals
from libra_des.hardware.variance import LogNormalNoise


@pytest.mark.parametrize("sigma", [0.0115, 0.3, 1.7])
def test_lognormal_noise_draws_numpys_numbers_and_leaves_its_stream(sigma: float) -> None:
    shape = (3, 5, 7, 64)
    ours, theirs = np.random.default_rng(11), np.random.default_rng(11)
    got = LogNormalNoise(sigma).sample(ours, shape)
    z = theirs.standard_normal(shape)
    z *= sigma
    z -= 0.5 * sigma**2
    assert np.array_equal(got, np.exp(z))
    assert np.array_equal(ours.random(8), theirs.random(8))  # the stream continues alike


def test_shifted_normals_scales_each_draw_without_fused_rounding() -> None:
    out = np.empty(10_001)
    shifted_normals(np.random.default_rng(2), out, 0.7, 0.245)
    z = np.random.default_rng(2).standard_normal(out.size)
    assert np.array_equal(out, z * 0.7 - 0.245)
