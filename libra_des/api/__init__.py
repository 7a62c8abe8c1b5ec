"""The Python API: load a scenario, simulate it, plan a training step, price one operation.

Everything a command does is reachable from Python without importing a command module::

    import libra_des

    sc = libra_des.load_scenario("scenarios/quickstart.yaml", {"parallelism.dp": 16})
    res = libra_des.simulate(sc, seed=1)            # or simulate("scenarios/x.yaml", ...)
    res["tokens_per_s"], res.kind, res.to_json()    # the result.json of `libra-des run`
    step = libra_des.step_plan(sc)                  # StepPlan of step 0 (training), no SimPy
    libra_des.cost("all_reduce", nbytes=8 << 20, group=8)  # seconds, one cost-model query

Studies (what ``paper_figs/`` draws from): :func:`run_sweep` runs a grid as ``libra-des sweep``
does (same resumable folder), :func:`replay_plans` is ``libra-des plan --json``,
:func:`moe_systems` names the shipped MoE systems and :func:`noise_factors` draws the
calibrated variance model directly.

Overrides are the CLI's ``--set`` strings (``["parallelism.dp=16"]``) or a mapping of dotted
keys to values (``{"parallelism.dp": 16}``); ``seed`` overrides the scenario's seed. Bad input
raises :class:`~libra_des.errors.InputError` (its ``line()`` is what the CLI would print) before
any work; a failed built-in conservation check raises :class:`~libra_des.errors.CheckError`.

The same scenario and seed give the same result as ``libra-des run``, byte for byte.

The API is a package of use-case modules, each a set of typed functions that import the layers
doing the work inside their bodies (so ``import libra_des.api`` stays cheap):

- :mod:`~libra_des.api.scenarios`: load, simulate, plan a step (re-exported here);
- :mod:`~libra_des.api.costs`: price one operation (re-exported here);
- :mod:`~libra_des.api.studies`: sweeps, plan replays, MoE systems, noise (re-exported here);
- :mod:`~libra_des.api.explain`: why run A beats run B, the difference split into components
  that add up to it (re-exported here);
- for the commands (``cli.py``, ``commands/`` import the package only through this API):
  :mod:`~libra_des.api.runs` (one run: preflight, timed simulation, its record),
  :mod:`~libra_des.api.seeds` (a scenario over N derived seeds, its spread),
  :mod:`~libra_des.api.sweeps`, :mod:`~libra_des.api.planning` (plan replay, TAP ranking),
  :mod:`~libra_des.api.profiles` (import, fit, validate, show / compare),
  :mod:`~libra_des.api.chakra` (import and export), :mod:`~libra_des.api.reports`,
  :mod:`~libra_des.api.calibration`, :mod:`~libra_des.api.scenario_fields` and
  :mod:`~libra_des.api.outputs` (output files and folders).
"""

from __future__ import annotations

from pathlib import Path

from libra_des.api.costs import (
    checked_cost_model,
    cost,
    cost_choices,
    cost_device_warnings,
    cost_model,
    cost_ops,
    cost_report,
    fabric_for,
)
from libra_des.api.explain import explain, explain_results
from libra_des.api.scenarios import (
    Overrides,
    Result,
    ScenarioLike,
    copy_scenario,
    load_scenario,
    load_training,
    shipped_path,
    simulate,
    step_plan,
)
from libra_des.api.studies import (
    AxisLike,
    PlanReplay,
    SweepPoint,
    SweepRun,
    moe_systems,
    noise_factors,
    replay_plans,
    run_sweep,
)
from libra_des.base.startup import tune_process as tune_process
from libra_des.base.version import __version__

__all__ = [
    "AxisLike", "Overrides", "PlanReplay", "Result", "ScenarioLike", "SweepPoint", "SweepRun",
    "__version__",
    "checked_cost_model", "copy_scenario", "cost", "cost_choices", "cost_device_warnings",
    "cost_model", "cost_ops", "cost_report", "explain", "explain_results", "fabric_for",
    "load_scenario", "load_training", "moe_systems", "noise_factors", "replay_plans",
    "run_sweep", "shipped_path", "simulate", "step_plan", "tune_process", "write_output",
]


def write_output(path: str | Path, data: str | bytes) -> None:
    """Write one output file under the output-folder policy (atomically, recorded in its
    folder's manifest; a file there the manifest does not vouch for is refused):
    :func:`libra_des.api.outputs.write_output`, imported on first use."""
    from libra_des.api.outputs import write_output as write

    write(path, data)
