"""Variance knobs the run would ignore are bad input (``config/ignored_knobs.py``)."""

from __future__ import annotations

import pytest

from libra_des.config.scenario import VarianceSpec
from tests.test_contract import one_line_error

QUICKSTART = "scenarios/quickstart.yaml"


@pytest.mark.parametrize(("knobs", "field"), [
    (["variance.enabled=false", "variance.noise_sigma=0.1"], "variance.noise_sigma"),
    (["variance.enabled=false", "variance.fleet=true"], "variance.fleet"),
    (["variance.slow_factor=2"], "variance.slow_factor"),
    (["variance.degraded_link_factor=3"], "variance.degraded_link_factor"),
    (["variance.failslow_rate=0", "variance.failslow_steps=3"], "variance.failslow_steps"),
    (["variance.node_episode_steps=3"], "variance.node_episode_steps"),
    (["variance.rack_nodes=3"], "variance.rack_nodes"),
    (["variance.link_jitter_correlation=0.2"], "variance.link_jitter_correlation"),
    (["variance.host_stall_seconds=0.01"], "variance.host_stall_seconds"),
    (["variance.noise_sigma=0", "variance.jitter_node_correlation=0.5"],
     "variance.jitter_node_correlation"),
])
def test_an_ignored_knob_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], knobs: list[str], field: str
) -> None:
    argv = ["scenario", "show", QUICKSTART]
    for knob in knobs:
        argv += ["--set", knob]
    line = one_line_error(capsys, argv)
    assert line.startswith(f"error: {field}: got ")


@pytest.mark.parametrize("knobs", [
    {"slow_gpu_fraction": 0.1, "slow_factor": 2.0},
    {"failslow_steps": 3.0},                      # the calibrated rate is on when unset
    {"fleet": True, "node_episode_steps": 3.0},   # the fleet default rate is on
    {"rack_episode_rate": 0.01, "rack_nodes": 2},
    {"link_jitter_sigma": 0.02, "link_jitter_correlation": 0.3, "rack_nodes": 2},
    {"gpu_speed_sigma": 0.01},                    # acts without fleet: true
    {"enabled": False},
])
def test_a_knob_whose_source_is_on_is_accepted(knobs: dict[str, object]) -> None:
    VarianceSpec(**knobs)


def test_a_full_dump_is_judged_like_the_file_it_came_from() -> None:
    off = VarianceSpec(enabled=False)
    assert VarianceSpec(**off.model_dump()) == off  # every field present, none set
    with pytest.raises(ValueError, match="slow_factor"):  # pydantic wraps InputError
        VarianceSpec(**{**VarianceSpec().model_dump(), "slow_factor": 2.0})
