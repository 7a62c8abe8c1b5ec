"""Persistent slowdowns and fail-slow episodes: the slow-GPU and degraded-link draw, the
two-state episode chain per GPU and step, its schedule as a pure function of (seed, step),
and episodes of whole nodes or racks. Their calibration and how they combine with the
per-op jitter: :mod:`libra_des.hardware.variance.model`; the structured sources that scope
episodes to nodes and racks: :mod:`libra_des.hardware.variance.fleet_variance`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class BernoulliSlowdown:
    """``factor`` with probability ``fraction``, else 1."""

    fraction: float
    factor: float

    @property
    def mean(self) -> float:
        return 1.0 + self.fraction * (self.factor - 1.0)

    @property
    def var(self) -> float:
        return self.fraction * (1.0 - self.fraction) * (self.factor - 1.0) ** 2

    @property
    def active(self) -> bool:
        """Whether it can ever slow anything (its variance is 0 also when fraction is 1)."""
        return self.fraction > 0 and self.factor != 1.0

    def sample(self, rng: np.random.Generator, shape: int | tuple[int, ...]) -> np.ndarray:
        hit = rng.random(shape) < self.fraction
        return np.where(hit, self.factor, 1.0)


@dataclass(frozen=True)
class FailSlowEpisodes:
    """Two-state chain per GPU and step; ``sample`` draws its stationary marginal."""

    rate: float
    steps: float
    factor: float

    @property
    def stationary(self) -> float:
        """Long-run share of steps a GPU spends slowed: rate / (rate + 1/steps)."""
        return self.rate * self.steps / (1.0 + self.rate * self.steps)

    @property
    def marginal(self) -> BernoulliSlowdown:
        return BernoulliSlowdown(self.stationary, self.factor)

    @property
    def mean(self) -> float:
        return self.marginal.mean

    @property
    def var(self) -> float:
        return self.marginal.var

    def sample(self, rng: np.random.Generator, shape: int | tuple[int, ...]) -> np.ndarray:
        return self.marginal.sample(rng, shape)


class EpisodeSchedule:
    """Which GPUs are in a fail-slow episode at each step, as a pure function of (seed, step).

    Steps are generated in blocks; block ``b`` draws from ``default_rng([seed, b])`` and
    continues the chain from the end of block ``b - 1``, so the answer does not depend on the
    order of queries. The memo only saves work (it never changes a result).
    """

    BLOCK = 64

    def __init__(self, episodes: FailSlowEpisodes, num_gpus: int, seed: int) -> None:
        self.episodes = episodes
        self.num_gpus = num_gpus
        self.seed = seed
        self._ends: list[np.ndarray] = []
        self._last: tuple[int, np.ndarray] | None = None

    def slowed(self, step: int) -> np.ndarray:
        block, offset = divmod(int(step), self.BLOCK)
        if self._last is None or self._last[0] != block:
            while len(self._ends) < block:
                self.generate(len(self._ends))
            self._last = (block, self.generate(block))
        row: np.ndarray = self._last[1][offset]  # one step's [G] flags (numpy types rows Any)
        return row

    def generate(self, block: int) -> np.ndarray:
        from libra_des.hardware.variance.noise_kernel import episode_states  # numba: on first use

        rng = np.random.default_rng([self.seed, block])
        # The uniforms of rng.random((BLOCK, GPUs)), each drawn where the chain uses it:
        # state 0 from the stationary law (block 0) or one step on from the last block's end,
        # then one step per row (a slowed GPU recovers with probability 1 / steps, a healthy
        # one starts an episode with probability rate).
        before = (np.zeros(self.num_gpus, dtype=bool) if block == 0
                  else self._ends[block - 1])
        states = episode_states(rng, self.BLOCK, before, block == 0,
                                self.episodes.stationary, 1.0 / self.episodes.steps,
                                self.episodes.rate)
        if len(self._ends) == block:
            self._ends.append(states[-1].copy())
        return states


@dataclass(frozen=True)
class ScopedEpisodes:
    """Fail-slow episodes of whole units (``unit_gpus`` consecutive GPUs: a node or a rack)."""

    unit_gpus: int
    schedule: EpisodeSchedule

    def slowdown(self, gpus: np.ndarray, step: int) -> np.ndarray:
        """Factor per GPU at ``step``: the episode factor where its unit is slowed, else 1."""
        slowed = self.schedule.slowed(step)[np.asarray(gpus) // self.unit_gpus]
        return np.where(slowed, self.schedule.episodes.factor, 1.0)
