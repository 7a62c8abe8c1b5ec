"""The simulation entry below the commands: one scenario in, its ``result.json`` dict out.

``libra-des run``, ``libra-des quickstart``, ``sweep.py`` and the Python API
(:func:`libra_des.api.simulate`) all run a scenario through :func:`simulate`, so nothing in the
package imports upwards into a command module. The simulators are imported inside the
functions: importing this module stays cheap (no SimPy, no numpy work).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from rich.progress import Progress

from libra_des.config import Scenario, scenario_dict
from libra_des.plausibility import check_result


def simulate(
    scenario: Scenario, progress: bool = False, trace_ranks: list[int] | None = None,
    want_trace: bool = False,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Run a scenario; returns (result, trace or None). Wall-clock fields: ``wall_s``."""
    rng = np.random.default_rng(scenario.seed)
    t0 = time.perf_counter()
    if scenario.kind == "moe_inference":
        from libra_des.sim.moe.simulator import simulate_moe

        timeline: list[Any] | None = [] if want_trace else None
        result = simulate_moe(scenario, rng, progress=progress, timeline=timeline)
        result["scenario"] = scenario_dict(scenario)
        result["wall_s"] = time.perf_counter() - t0
        check_result(result, scenario, elaborate_peak(scenario))
        return result, moe_trace_of(scenario, timeline)
    return simulate_training_result(scenario, rng, t0, progress, want_trace, trace_ranks)


def simulate_training_result(
    scenario: Scenario,
    rng: np.random.Generator,
    t0: float,
    progress: bool,
    want_trace: bool,
    trace_ranks: list[int] | None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    from libra_des.metrics import step_flops, training_result
    from libra_des.sim.training.schedules import build_schedule
    from libra_des.sim.training.simulator import simulate_training
    from libra_des.trace import chrome_trace

    with Progress(transient=True, disable=not progress) as bar:
        task = bar.add_task("simulating steps", total=scenario.steps)
        records = simulate_training(scenario, rng, lambda _s: bar.advance(task))
    par = scenario.parallelism
    schedule = build_schedule(par.schedule, par.pp, par.microbatches, par.virtual_stages)
    masks = [np.array([op.kind == "F" for op in order]) for order in schedule.orders]
    peak = elaborate_peak(scenario)
    result = training_result(scenario, records, masks, peak)
    result["wall_s"] = time.perf_counter() - t0
    flops = float(np.mean([step_flops(scenario, r) for r in records]))
    check_result(result, scenario, peak, flops)
    trace = chrome_trace(records, schedule, trace_ranks, scenario) if want_trace else None
    return result, trace


def moe_trace_of(scenario: Scenario, timeline: list[Any] | None) -> dict[str, Any] | None:
    """The MoE prefill trace (stages per GPU per layer), when one was asked for."""
    if timeline is None:
        return None
    from libra_des.trace_moe import moe_trace

    gpus = 1 + max((t[3] for t in timeline if t[3] is not None), default=0)
    return moe_trace(timeline, scenario, gpus)


def elaborate_peak(scenario: Scenario) -> float:
    """Dense bf16 peak FLOP/s of the scenario's device (from its profile)."""
    from libra_des.hardware.profile import load_profile

    return float(load_profile(scenario.profile).peak_flops("bf16"))
