"""The variance's compiled draws against numpy's: the same numbers, the same stream."""

from __future__ import annotations

import numpy as np
import pytest

from libra_des.hardware.variance.episodes import EpisodeSchedule, FailSlowEpisodes
from libra_des.hardware.variance.model import LogNormalNoise
from libra_des.hardware.variance.noise_kernel import shifted_normals


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


def advance(episodes: FailSlowEpisodes, slowed: np.ndarray, uniform: np.ndarray) -> np.ndarray:
    """One step of the two-state chain, one uniform per GPU: a slowed GPU recovers with
    probability 1 / steps, a healthy one starts an episode with probability rate."""
    return np.where(slowed, uniform >= 1.0 / episodes.steps, uniform < episodes.rate)


def numpy_block(schedule: EpisodeSchedule, block: int) -> np.ndarray:
    """The chain's block as numpy arrays: every uniform drawn first, one step per row."""
    rng = np.random.default_rng([schedule.seed, block])
    uniform = rng.random((schedule.BLOCK, schedule.num_gpus))
    episodes = schedule.episodes
    states = np.empty(uniform.shape, dtype=bool)
    states[0] = (uniform[0] < episodes.stationary if block == 0
                 else advance(episodes, numpy_block(schedule, block - 1)[-1], uniform[0]))
    for t in range(1, schedule.BLOCK):
        states[t] = advance(episodes, states[t - 1], uniform[t])
    return states


@pytest.mark.parametrize(("rate", "steps"), [(5e-4, 5.0), (0.2, 2.0), (0.05, 1.5)])
def test_episode_blocks_are_the_numpy_chains(rate: float, steps: float) -> None:
    schedule = EpisodeSchedule(FailSlowEpisodes(rate, steps, 1.1), 3000, seed=7)
    for step in (0, 70, 130, 200):  # blocks 0 .. 3, each continuing the one before
        assert np.array_equal(schedule.slowed(step),
                              numpy_block(schedule, step // schedule.BLOCK)[step % 64])
