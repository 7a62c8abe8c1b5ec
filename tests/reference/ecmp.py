"""The ECMP collision factor by hashing (``libra_des.hardware.collectives.ecmp.collision_factor``
gives
it in closed form; tests/test_fast_fabric.py compares the two)."""

from __future__ import annotations

import numpy as np


def monte_carlo_factor(
    flows: int, bins: int, groups: int, trials: int, rng: np.random.Generator
) -> float:
    """The same ratio by hashing: each flow of each group to a uniform random bin."""
    picks = rng.integers(0, bins, size=(trials * groups, flows))
    picks += (np.arange(trials * groups) * bins)[:, None]
    loads = np.bincount(picks.ravel(), minlength=trials * groups * bins)
    return float(loads.reshape(trials, -1).max(axis=1).mean() / (flows / bins))
