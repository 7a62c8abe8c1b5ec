"""Op durations costed in blocks of entities equal those costed all at once, bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from libra_des.config import load_scenario
from libra_des.sim.training import stagetimes
from libra_des.sim.training.simulator import simulate_training

REPO = Path(__file__).resolve().parents[1]


def step_times(block: int, monkeypatch: pytest.MonkeyPatch) -> list[stagetimes.DeviceTimes]:
    monkeypatch.setattr(stagetimes, "ENTITY_BLOCK", block)
    # 8 pipeline entities (DP 16, pools of 2), noise on: blocks of 3 leave a ragged last one.
    scenario = load_scenario(REPO / "scenarios" / "quickstart.yaml",
                             ["parallelism.dp=16", "parallelism.gbs=32", "balancer.pool_size=2"])
    (record,) = simulate_training(scenario, np.random.default_rng(1))
    return list(record.times)


def test_entity_blocks_do_not_change_any_number(monkeypatch: pytest.MonkeyPatch) -> None:
    whole, blocked = step_times(1024, monkeypatch), step_times(3, monkeypatch)
    assert whole[0].duration.shape[0] == 8
    for a, b in zip(whole, blocked, strict=True):
        for name in stagetimes.DeviceTimes.__dataclass_fields__:
            x, y = getattr(a, name), getattr(b, name)
            assert x.shape == y.shape and np.array_equal(x, y), name
