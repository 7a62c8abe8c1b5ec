"""A run does each piece of its set-up once: one elaboration of the scenario, one load of its
profile, one pipeline schedule, one memory report handed on to the result (counted by
wrapping each function with a counter and running a tiny scenario through the API)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

import libra_des.hardware.profiles.profile as profile_module
import libra_des.kinds.training as training_kind
import libra_des.sim.training.memory as memory_module
import libra_des.sim.training.schedules as schedules_module
import libra_des.sim.training.simulator as simulator_module
import libra_des.workload.packing as packing_module
from libra_des.api import load_scenario
from libra_des.api.runs import simulate_timed

#: A tiny training run: two steps, two stages, fixed TAP knobs (no ``auto`` search, whose
#: candidates each ask the memory model by design).
TINY = ["parallelism.dp=4", "parallelism.cp=4", "parallelism.pp=2", "parallelism.gbs=8",
        "balancer.pool_size=4", "steps=2", "workload=longctx-256k", "model.layers=4",
        "variance.enabled=false", "balancer.heads_split=4", "balancer.block_size=16384",
        "topology_params.nodes=4", "memory.check=error"]


def counted(monkeypatch: pytest.MonkeyPatch, calls: Counter[str], name: str,
            places: list[tuple[Any, str]]) -> None:
    """Replace the function at each (module, attribute) of ``places`` by one that counts its
    calls under ``name`` and then runs the original."""
    original: Callable[..., Any] = getattr(*places[0])

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        return original(*args, **kwargs)

    for module, attribute in places:
        monkeypatch.setattr(module, attribute, wrapper)


def count_run(monkeypatch: pytest.MonkeyPatch, scenario: str, overrides: list[str]
              ) -> tuple[Counter[str], dict[str, Any]]:
    calls: Counter[str] = Counter()
    counted(monkeypatch, calls, "elaborate", [(training_kind, "resolve_balancer")])
    counted(monkeypatch, calls, "profile", [(profile_module, "parse_profile")])
    counted(monkeypatch, calls, "schedule", [(simulator_module, "build_schedule"),
                                             (schedules_module, "build_schedule")])
    counted(monkeypatch, calls, "memory", [(simulator_module, "stage_memory"),
                                           (memory_module, "stage_memory")])
    counted(monkeypatch, calls, "window", [(packing_module.CorpusStream, "next_window")])
    loaded = load_scenario(scenario, overrides)
    result, _trace, _timing = simulate_timed(loaded)
    return calls, result


def test_a_training_run_does_its_set_up_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls, result = count_run(monkeypatch, "scenarios/quickstart.yaml", TINY)
    assert result["kind"] == "training"
    assert calls["elaborate"] == 1  # loading elaborates; running the loaded scenario does not
    assert calls["profile"] == 1  # the run, the device check, the peak and the band share it
    # One schedule for the elaboration's memory floor, one for the whole run (steps, memory,
    # metrics and trace), whatever the number of steps.
    assert calls["schedule"] == 2
    # The floor on the first window (at elaboration) and the plans' report: no third ask.
    assert calls["memory"] == 2
    # Windows asked for: the elaboration's first look (drawn), the first step's (the kept
    # first look handed back, not drawn again) and the second step's. Drawing the first
    # window again for the run, as before, made it 4.
    assert calls["window"] == 3


def test_a_scenario_elaborated_is_not_elaborated_again(monkeypatch: pytest.MonkeyPatch) -> None:
    import libra_des.kinds as kinds

    calls: Counter[str] = Counter()
    counted(monkeypatch, calls, "elaborate", [(training_kind, "resolve_balancer")])
    loaded = load_scenario("scenarios/quickstart.yaml", TINY)
    assert kinds.elaborated(loaded) is loaded
    # A new scenario object (another seed) is a new scenario: elaborated once more.
    other = load_scenario(loaded, ["seed=3"])
    assert kinds.elaborated(other) is other
    assert calls["elaborate"] == 2


def test_an_moe_run_loads_its_profile_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls, result = count_run(monkeypatch, "scenarios/moe-qwen3-235b.yaml",
                              ["workload.batches=1"])
    assert result["kind"] == "moe_inference"
    assert calls["profile"] == 1


def test_a_sweep_point_is_elaborated_once_even_in_a_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A point travels to a worker process as a copy (pickled), which the process-local
    record of elaborated scenarios cannot recognise: the sweep vouches for it instead."""
    import pickle

    from libra_des.runs import sweep

    calls: Counter[str] = Counter()
    counted(monkeypatch, calls, "elaborate", [(training_kind, "resolve_balancer")])
    loaded = load_scenario("scenarios/quickstart.yaml", TINY)
    assert calls["elaborate"] == 1
    outcome = sweep.run_point(pickle.loads(pickle.dumps(loaded)))
    assert outcome.text is not None, outcome.error
    assert calls["elaborate"] == 1
