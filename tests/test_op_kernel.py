"""Op durations from ``op_kernel`` (what ``stagetimes.device_times`` runs) against the plain
numpy form in tests/reference/stagetimes.py, on the inputs real steps pass: noise, link
jitter and host gaps, routing skew, full recomputation, interference on and off, token
shares of variable-length microbatches."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
from reference.stagetimes import device_times_numpy

from libra_des.config import ROOT, load_scenario
from libra_des.kinds.simulation import simulate
from libra_des.sim.training import simulator, stagetimes

SMALL = ["parallelism.dp=4", "parallelism.cp=4", "parallelism.pp=2", "parallelism.gbs=8",
         "balancer.pool_size=2", "model.layers=6", "workload=longctx-256k", "steps=1",
         "balancer.heads_split=4", "balancer.block_size=16384", "topology_params.nodes=4"]
CASES = {
    "noise, skew, interference": [],
    "links and host gaps": ["variance.link_jitter_sigma=0.1", "variance.launch_gap_seconds=1e-5",
                            "variance.host_stall_rate=0.2", "variance.host_stall_seconds=1e-4"],
    "full recomputation": ["memory.recompute=full"],
    "recomputation, free overlap": ["memory.recompute=full", "overlap.interference=off"],
    "no noise, balanced experts": ["variance.enabled=false", "workload.expert_skew=false"],
    "wlb-llm token shares": ["balancer.policy=wlb_llm"],
}


def compared(monkeypatch: pytest.MonkeyPatch, sets: list[str]) -> int:
    """Runs a small step with every device's times also costed by the reference from the
    same random state; returns how many devices were compared."""
    calls = []
    kernel = stagetimes.device_times

    def both(*args: Any, **kwargs: Any) -> stagetimes.DeviceTimes:
        variance, rng, step = args[6]
        twin = copy.deepcopy(rng)
        got = kernel(*args, **kwargs)
        ref = device_times_numpy(*args[:6], (variance, twin, step), *args[7:], **kwargs)
        assert rng.bit_generator.state == twin.bit_generator.state  # the same draws
        for name in stagetimes.DeviceTimes.__dataclass_fields__:
            a, b = getattr(got, name), getattr(ref, name)
            assert a.shape == b.shape, name
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-18, err_msg=name)
        calls.append(got)
        return got

    monkeypatch.setattr(simulator, "device_times", both)
    simulate(load_scenario(ROOT / "scenarios" / "quickstart.yaml", [*SMALL, *sets]))
    return len(calls)


@pytest.mark.parametrize("sets", CASES.values(), ids=CASES.keys())
def test_kernel_equals_the_numpy_form(monkeypatch: pytest.MonkeyPatch, sets: list[str]) -> None:
    assert compared(monkeypatch, sets) >= 2  # both pipeline stages


def test_a_dropped_input_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison can fail: costing without the routing skew's inputs differs."""
    def balanced(lin: Any, schedule: Any, device: int, layout: Any, is_f: np.ndarray,
                 lmax: int) -> np.ndarray:
        return np.stack([np.zeros((is_f.size, lmax)), np.ones((is_f.size, lmax))])

    monkeypatch.setattr(stagetimes, "expert_parts", balanced)
    with pytest.raises(AssertionError):
        compared(monkeypatch, CASES["noise, skew, interference"])
