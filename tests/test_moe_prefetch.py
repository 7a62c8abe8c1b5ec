"""Generated MoE batches drawn by a helper process give the run's own results, bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from libra_des.config import load_scenario
from libra_des.results.moe_metrics import simulate_moe
from libra_des.sim.moe import batch as batch_module
from libra_des.sim.moe import prefetch
from libra_des.sim.moe.simulator import WALL_CLOCK_FIELDS

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "moe-qwen3-235b.yaml"
# Three small batches (the helper runs ahead of the simulation); Lina draws a profile too.
SMALL = ["model.layers=3", "workload.batches=3", "workload.batch=2", "workload.seq_len=256"]


@pytest.mark.parametrize(("policy", "fork"), [("libra", True), ("lina", True), ("libra", False)])
def test_prefetched_batches_give_the_same_result(
    policy: str, fork: bool, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(prefetch, "forkable", lambda: fork)
    sc = load_scenario(SCENARIO, [*SMALL, f"balancer.policy={policy}"])
    here = simulate_moe(sc, np.random.default_rng(3), prefetch=False)
    helped = simulate_moe(sc, np.random.default_rng(3), prefetch=True)
    for key in WALL_CLOCK_FIELDS:
        here.pop(key, None)
        helped.pop(key, None)
    assert helped == here


def test_only_large_runs_with_a_spare_cpu_start_a_helper(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prefetch.os, "cpu_count", lambda: 4)
    monkeypatch.setattr(prefetch.os, "getloadavg", lambda: (1.0, 1.0, 1.0))
    assert prefetch.worthwhile(prefetch.PREFETCH_UNIFORMS)
    assert not prefetch.worthwhile(prefetch.PREFETCH_UNIFORMS - 1)
    monkeypatch.setattr(prefetch.os, "getloadavg", lambda: (3.6, 1.0, 1.0))
    assert not prefetch.worthwhile(prefetch.PREFETCH_UNIFORMS)  # busy: the helper would only cost


def test_a_failed_helper_leaves_the_run_to_draw_its_batches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sc = load_scenario(SCENARIO, SMALL)
    here = simulate_moe(sc, np.random.default_rng(4), prefetch=False)
    monkeypatch.setattr(prefetch, "forkable", lambda: False)
    monkeypatch.setattr(prefetch.sys, "executable", "false")  # exits at once, says nothing
    helped = simulate_moe(sc, np.random.default_rng(4), prefetch=True)
    assert helped == here


def test_a_failed_fork_leaves_the_run_to_draw_its_batches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sc = load_scenario(SCENARIO, SMALL)
    here = simulate_moe(sc, np.random.default_rng(4), prefetch=False)

    def broken(*_: object) -> None:  # runs in the forked helper only
        raise RuntimeError("helper failed")

    monkeypatch.setattr(prefetch, "forkable", lambda: True)
    monkeypatch.setattr(prefetch, "draw_into", broken)
    helped = simulate_moe(sc, np.random.default_rng(4), prefetch=True)
    assert helped == here


def test_a_fork_only_where_no_other_thread_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prefetch.sys, "platform", "linux")
    monkeypatch.setattr(prefetch.threading, "active_count", lambda: 1)
    assert prefetch.forkable()
    monkeypatch.setattr(prefetch.threading, "active_count", lambda: 2)
    assert not prefetch.forkable()


@pytest.mark.parametrize("policy", ["libra", "eplb"])
def test_batches_drawn_by_a_thread_give_the_same_result(policy: str) -> None:
    sc = load_scenario(SCENARIO, [*SMALL, f"balancer.policy={policy}"])
    here = simulate_moe(sc, np.random.default_rng(5), prefetch=False)
    threaded = simulate_moe(sc, np.random.default_rng(5), prefetch="thread")
    assert threaded == here


def test_an_error_in_the_drawing_thread_reaches_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    sc = load_scenario(SCENARIO, SMALL)

    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("generation failed")

    # Libra draws no profile, so only the thread generates (the run reads its queue).
    monkeypatch.setattr(batch_module, "generate_trace", broken)
    with pytest.raises(RuntimeError, match="generation failed"):
        simulate_moe(sc, np.random.default_rng(5), prefetch="thread")


@pytest.mark.parametrize("policy", ["eplb", "lina"])
def test_batches_do_not_depend_on_the_profile(policy: str) -> None:
    """A system that learns from a profile (EPLB, Lina) is served the batches a system
    without one is, and a planner that only draws (a helper's, the cache's) draws them too:
    the profile has its own stream."""
    plain = load_scenario(SCENARIO, [*SMALL, "balancer.policy=libra"])
    profiled = load_scenario(SCENARIO, [*SMALL, f"balancer.policy={policy}"])
    planners = [batch_module.BatchPlanner.build(sc, 8, np.random.default_rng(5), **kw)
                for sc, kw in ((plain, {}), (profiled, {}), (profiled, {"draws_only": True}))]
    assert planners[1].predictor is not None or planners[1].static_layout is not None
    assert planners[2].predictor is None and planners[2].static_layout is None
    for b in range(planners[0].batches):
        first, *others = (p.trace(b) for p in planners)
        assert all(np.array_equal(first.by_layer, t.by_layer) for t in others)
