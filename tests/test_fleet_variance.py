"""Structured variance sources: their means, correlation structure, determinism, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from libra_des.config import VarianceSpec
from libra_des.errors import InputError
from libra_des.hardware.variance.fleet_variance import FLEET, correlated_normals
from libra_des.hardware.variance.model import VarianceModel

GPN = 8


def only(**knobs: float) -> VarianceSpec:
    """A spec with no older noise at all, so each structured source is seen alone."""
    return VarianceSpec(noise_sigma=0.0, failslow_rate=0.0, **knobs)


def build(spec: VarianceSpec, gpus: int, seed: int) -> tuple[VarianceModel, np.random.Generator]:
    rng = np.random.default_rng(seed)
    return VarianceModel.build(spec, gpus, rng, gpus_per_node=GPN), rng


def test_persistent_speed_has_mean_one_its_spread_and_stays_for_the_run() -> None:
    model, rng = build(only(gpu_speed_sigma=0.05), 40_000, 1)
    gpus = np.arange(40_000)
    first, later = model.factors(rng, gpus, 1, 0)[0], model.factors(rng, gpus, 1, 300)[0]
    assert np.array_equal(first, later)  # persistent: the same every op and step
    assert first.mean() == pytest.approx(1.0, abs=0.002)
    assert np.log(first).std() == pytest.approx(0.05, rel=0.02)
    assert model.mean == pytest.approx(1.0) and model.var == pytest.approx(np.expm1(0.05**2))


def test_node_correlated_jitter_keeps_the_marginal_and_correlates_within_a_node() -> None:
    rho, sigma = 0.6, 0.04
    model, rng = build(VarianceSpec(noise_sigma=sigma, failslow_rate=0.0,
                                    jitter_node_correlation=rho), 64, 2)
    f = np.log(model.factors(rng, np.arange(64), 20_000, 0))
    assert f.std(axis=0).mean() == pytest.approx(sigma, rel=0.02)
    corr = np.corrcoef(f.T)
    same = [corr[i, j] for i in range(64) for j in range(64) if i != j and i // GPN == j // GPN]
    other = [corr[i, j] for i in range(0, 64, 3) for j in range(64) if i // GPN != j // GPN]
    assert np.mean(same) == pytest.approx(rho, abs=0.02)
    assert abs(np.mean(other)) < 0.01


def test_correlated_normals_refuse_a_correlation_above_one() -> None:
    with pytest.raises(InputError, match="jitter_node_correlation"):
        correlated_normals(np.random.default_rng(0), np.arange(4), 2, 1.5, 2)


@pytest.mark.parametrize("scope", ["node", "rack"])
def test_scoped_episodes_slow_whole_units_at_their_stationary_share(scope: str) -> None:
    # rack_nodes sizes racks only: with node episodes alone it would be ignored (refused).
    knobs = {f"{scope}_episode_rate": 0.02, f"{scope}_episode_steps": 5.0,
             f"{scope}_episode_factor": 1.5, **({"rack_nodes": 2} if scope == "rack" else {})}
    spec = only(**knobs)
    model, rng = build(spec, 512, 3)
    unit = GPN * (2 if scope == "rack" else 1)
    gpus = np.arange(512)
    slowed = np.array([model.factors(rng, gpus, 1, s)[0] > 1.0 for s in range(0, 2000, 7)])
    units = slowed.reshape(slowed.shape[0], -1, unit)
    assert (units.all(axis=2) == units.any(axis=2)).all()  # a unit is slowed as one
    stationary = 0.02 * 5 / (1 + 0.02 * 5)
    assert units[:, :, 0].mean() == pytest.approx(stationary, abs=0.02)
    assert model.mean == pytest.approx(1 + stationary * 0.5)


def test_structured_sources_are_deterministic_under_a_seed() -> None:
    spec = VarianceSpec(fleet=True)
    draws = []
    for seed in (7, 7, 8):
        model, rng = build(spec, 256, seed)
        draws.append(model.factors(rng, np.array([0, 5, 9, 200]), 30, step=40))
    assert np.array_equal(draws[0], draws[1]) and not np.array_equal(draws[0], draws[2])


def test_fleet_fills_only_unset_knobs_and_off_draws_nothing_new() -> None:
    fleet, _ = build(VarianceSpec(fleet=True, gpu_speed_sigma=0.0), 64, 0)
    assert fleet.structure.speed is None
    assert fleet.structure.correlation == FLEET.jitter_node_correlation
    plain, rng = build(VarianceSpec(), 64, 0)
    assert plain.structure.speed is None and plain.structure.scoped == ()
    # Off, the build draws what it drew before the structured sources: two seeds, no more.
    legacy = np.random.default_rng(0)
    legacy.integers(0, 2**63, size=2)
    assert rng.random() == legacy.random()
