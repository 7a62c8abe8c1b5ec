"""Link jitter, link degradation and host gaps: means, correlation structure, determinism,
bad input, and their hook in the training step's op durations."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_fleet_variance import GPN, build, only

from libra_des.cli import main
from libra_des.config import VarianceSpec
from libra_des.errors import InputError
from libra_des.hardware.variance.link_host_variance import HostGaps, LinkVariance
from libra_des.hardware.variance.model import VarianceModel


def test_link_jitter_has_mean_one_its_sigma_and_rack_correlation() -> None:
    sigma, rho = 0.05, 0.5
    model, rng = build(only(link_jitter_sigma=sigma, link_jitter_correlation=rho, rack_nodes=4),
                       64 * GPN, 1)
    assert model.network is not None
    f = model.network.link_factors(rng, np.arange(64), 20_000, 0)
    assert f.mean() == pytest.approx(1.0, abs=0.001)
    assert np.log(f).std(axis=0).mean() == pytest.approx(sigma, rel=0.02)
    corr = np.corrcoef(np.log(f).T)
    same = [corr[i, j] for i in range(64) for j in range(64) if i != j and i // 4 == j // 4]
    other = [corr[i, j] for i in range(0, 64, 3) for j in range(64) if i // 4 != j // 4]
    assert np.mean(same) == pytest.approx(rho, abs=0.02)
    assert abs(np.mean(other)) < 0.01
    # Independent across transfers: consecutive rows of one link are uncorrelated.
    lag = np.corrcoef(np.log(f[:-1, 0]), np.log(f[1:, 0]))[0, 1]
    assert abs(lag) < 0.03


def test_an_exchange_ends_with_its_slowest_link() -> None:
    """Closed form: the max of k independent lognormal links; one node gives the marginal."""
    model, rng = build(only(link_jitter_sigma=0.05), 16 * GPN, 2)
    gpus = np.arange(16 * GPN)
    one_node = model.exchange_factors(rng, gpus, GPN, 40_000, 0)  # 16 entities, 1 node each
    assert one_node is not None and one_node.shape == (40_000, 16)
    assert one_node.mean() == pytest.approx(1.0, abs=0.001)
    four_nodes = model.exchange_factors(rng, gpus, 4 * GPN, 40_000, 0)
    assert four_nodes is not None
    z = np.random.default_rng(0).standard_normal((200_000, 4)).max(axis=1)
    expected = np.exp(0.05 * z - 0.5 * 0.05**2).mean()
    assert four_nodes.mean() == pytest.approx(expected, abs=0.001)
    assert four_nodes.mean() > 1.02


def test_link_episodes_slow_whole_links_at_their_stationary_share() -> None:
    model, rng = build(only(link_episode_rate=0.02, link_episode_steps=5.0,
                            link_episode_factor=3.0), 256 * GPN, 3)
    assert model.network is not None
    nodes = np.arange(256)
    slowed = np.array([model.network.link_factors(rng, nodes, 2, s) > 1 for s in range(0, 1500, 7)])
    assert (slowed[:, 0] == slowed[:, 1]).all()  # a degraded link stays so for the step
    stationary = 0.02 * 5 / (1 + 0.02 * 5)
    assert slowed.mean() == pytest.approx(stationary, abs=0.01)
    step_a = model.network.link_factors(rng, nodes, 1, 40)
    step_b = model.network.link_factors(rng, nodes, 1, 41)
    assert (step_a == step_b).mean() > 0.9  # episodes last steps: consecutive steps agree


def test_host_gaps_mean_and_independence_across_gpus() -> None:
    host = HostGaps(launch_gap_seconds=1e-4, stall_rate=0.01, stall_seconds=0.2)
    g = host.gaps(np.random.default_rng(4), 20_000, 4, 16)
    per_op = g.sum(axis=1)
    assert per_op.mean() == pytest.approx(host.mean(4), rel=0.03)
    assert g[:, 1:, :].mean() == pytest.approx(1e-4, rel=0.02)  # launch gaps only past layer 0
    stalls = g[:, 0, :] > 0.1
    assert stalls.mean() == pytest.approx(0.01, abs=0.002)
    corr = np.corrcoef(per_op.T)
    assert abs(corr[np.triu_indices(16, 1)].mean()) < 0.01


@pytest.mark.parametrize("knobs", [
    {"link_jitter_sigma": 0.03, "link_jitter_correlation": 0.2},
    {"link_episode_rate": 0.01},
    {"launch_gap_seconds": 1e-5, "host_stall_rate": 0.01},
])
def test_new_sources_are_deterministic_under_a_seed(knobs: dict[str, float]) -> None:
    draws = []
    for seed in (7, 7, 8):
        model, rng = build(only(**knobs), 64 * GPN, seed)
        x = model.exchange_factors(rng, np.arange(64 * GPN), 2 * GPN, 30, 9)
        h = model.host_gaps(rng, 30, 3, 64)
        draws.append(np.concatenate([a.ravel() for a in (x, h) if a is not None]))
    assert np.array_equal(draws[0], draws[1]) and not np.array_equal(draws[0], draws[2])


def test_off_draws_nothing_and_fleet_turns_them_on() -> None:
    model, _ = build(VarianceSpec(), 64, 0)
    assert model.network is None and model.host is None
    fleet, _ = build(VarianceSpec(fleet=True), 64, 0)
    assert fleet.network is not None and fleet.host is not None
    before = np.random.default_rng(5)
    VarianceModel.build(VarianceSpec(gpu_speed_sigma=0.01), 64, before, GPN)
    after = np.random.default_rng(5)
    VarianceModel.build(VarianceSpec(gpu_speed_sigma=0.01, launch_gap_seconds=0.0), 64, after, GPN)
    assert before.random() == after.random()


@pytest.mark.parametrize(("make", "field"), [
    (lambda: LinkVariance(0.01, 1.2, 8, 4), "link_jitter_correlation"),
    (lambda: LinkVariance(-0.1, 0.0, 8, 4), "link_jitter_sigma"),
    (lambda: HostGaps(-1e-5, 0.0, 0.0), "launch_gap_seconds"),
    (lambda: HostGaps(0.0, 1.5, 0.1), "host_stall_rate"),
])
def test_bad_values_are_one_line_input_errors(make: object, field: str) -> None:
    with pytest.raises(InputError, match=field):
        make()  # type: ignore[operator]


@pytest.mark.parametrize("knob", ["link_jitter_correlation=1.5", "link_jitter_sigma=-0.1",
                                  "host_stall_seconds=-1"])
def test_cli_refuses_bad_knobs_in_one_line(knob: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "scenarios/quickstart.yaml", "--set", f"variance.{knob}",
                 "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and knob.split("=")[0] in err
    assert not any(tmp_path.iterdir())
