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

The same scenario and seed give the same result as ``libra-des run``, byte for byte (the run's
wall-clock time goes to ``run.json``, not the result): both go through
:func:`libra_des.kinds.simulation.simulate`. A scenario object is validated again before it runs,
so one changed with ``model_copy`` (which skips pydantic's validators) is checked too.
"""

from __future__ import annotations

import json
import math
import numbers
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Union

from libra_des import __version__ as __version__
from libra_des import config
from libra_des.base.identity import portable_paths
from libra_des.base.startup import tune_process as tune_process
from libra_des.errors import InputError

if TYPE_CHECKING:
    import numpy as np

    from libra_des.config import Scenario
    from libra_des.hardware.cost_ops import CostOp, CostReport
    from libra_des.hardware.costs import CostModel
    from libra_des.hardware.fabric import Fabric
    from libra_des.hardware.profile import Profile
    from libra_des.plan.step import StepPlan

__all__ = [
    "Result", "SweepPoint", "SweepRun", "cost", "cost_choices", "cost_model", "cost_ops",
    "cost_report", "fabric_for", "load_scenario", "moe_systems", "noise_factors",
    "replay_plans", "run_sweep", "simulate", "step_plan", "tune_process",
]

#: Latest step :func:`step_plan` replays to (every earlier step is planned on the way):
#: 10,000 steps take about a minute; our choice, far beyond a simulated run's steps.
MAX_PLAN_STEP = 10_000
#: A scenario object or the path of a scenario YAML file.
ScenarioLike = Union["Scenario", str, "os.PathLike[str]"]
#: ``--set`` strings, or dotted keys mapped to values.
Overrides = Iterable[str] | Mapping[str, Any]


@dataclass(frozen=True)
class Result(Mapping[str, Any]):
    """One simulation's outcome: the ``result.json`` mapping of ``libra-des run``, read-only.

    ``kind`` is the scenario kind (``training`` or ``moe_inference``) and decides which keys
    exist (definitions: :mod:`libra_des.results.metrics` for training,
    :mod:`libra_des.sim.moe.simulator` for MoE prefill). ``trace`` is the Chrome trace when
    asked for (training only). The mapping is a read-only view of the top level;
    :meth:`to_dict` gives an independent deep copy.
    """

    kind: str
    data: Mapping[str, Any]
    trace: Mapping[str, Any] | None = field(default=None, repr=False)

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def to_dict(self) -> dict[str, Any]:
        """A deep, mutable copy of the result."""
        out: dict[str, Any] = json.loads(self.to_json())
        return out

    def to_json(self) -> str:
        """The exact text ``libra-des run`` writes to ``result.json`` (without the newline)."""
        from libra_des.base.storage import dumps

        return dumps(dict(self.data))


def is_int(value: Any) -> bool:
    """An integer (numpy's too), not a bool: what count-like arguments accept."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def override_texts(overrides: Overrides) -> list[str]:
    """``--set`` strings from either form; mapping values travel as JSON (a YAML subset)."""
    if isinstance(overrides, str):
        return [overrides]
    if not isinstance(overrides, Mapping):
        if not isinstance(overrides, Iterable) or isinstance(overrides, bytes):
            raise InputError("overrides", overrides, "--set strings or {dotted key: value}")
        return [str(text) for text in overrides]
    texts = []
    for key, value in overrides.items():
        try:
            texts.append(f"{key}={json.dumps(value)}")
        except (TypeError, ValueError):
            allowed = "a JSON-able value (number, text, list, map)"
            raise InputError(str(key), value, allowed) from None
    return texts


def load_scenario(
    scenario: ScenarioLike, overrides: Overrides = (), seed: int | None = None
) -> Scenario:
    """A validated scenario from a path or a scenario object, with overrides applied in order.

    A path goes through exactly what ``libra-des run PATH --set ...`` does. A scenario object
    is dumped to its resolved form, overridden and validated again (file references in an
    override resolve against the current directory, then the shipped folders). Either way the
    scenario kind's ``elaborate`` (:mod:`libra_des.kinds`) checks the names only registries
    can see and gives the scenario to run (a training balancer's own knobs in its model).
    """
    from libra_des import kinds
    from libra_des.config import ScenarioBase

    if not isinstance(scenario, ScenarioBase | str | os.PathLike) or isinstance(scenario, bytes):
        raise InputError("scenario", scenario, "a Scenario or the path of a scenario YAML")
    texts = override_texts(overrides)
    if seed is not None:
        texts.append(f"seed={json.dumps(seed)}")
    if isinstance(scenario, str | os.PathLike):
        loaded = config.load_scenario(Path(scenario), texts)
    elif not texts:
        # model_copy(update=...) skips every validator: check the object as a file would be.
        loaded = config.validate_scenario(scenario.model_dump(mode="json", warnings=False))
    else:
        # The keys the scenario set, not every default: a knob only its balancer reads (e.g.
        # WLB-LLM's) must not follow the scenario into another ``balancer.policy``.
        data = dict(portable_paths(scenario.model_dump(mode="json", exclude_unset=True)))
        for text in texts:
            data = config.elaborate(config.apply_overrides(data, [text]), Path.cwd())
        loaded = config.validate_scenario(data)
    resolved: Scenario = kinds.kind_of(loaded).elaborate(loaded)
    return resolved


def simulate(
    scenario: ScenarioLike,
    overrides: Overrides = (),
    seed: int | None = None,
    *,
    trace: bool = False,
    trace_ranks: Sequence[int] | None = None,
    progress: bool = False,
) -> Result:
    """Simulate a scenario (object or YAML path) and return its :class:`Result`.

    ``trace`` also builds the Chrome trace (training; ``trace_ranks`` picks rank groups);
    ``progress`` shows a progress bar on the terminal.
    """
    from libra_des.kinds.simulation import simulate as run

    sc = load_scenario(scenario, overrides, seed)
    ranks = list(trace_ranks) if trace_ranks is not None else None
    if ranks is not None and not all(is_int(r) and r >= 0 for r in ranks):
        raise InputError("trace_ranks", trace_ranks, "integers >= 0 (rank groups)")
    data, chrome = run(sc, progress=progress, trace_ranks=ranks, want_trace=trace)
    return Result(str(data.get("kind", sc.kind)), MappingProxyType(data), chrome)


def step_plan(
    scenario: ScenarioLike, overrides: Overrides = (), seed: int | None = None, step: int = 0
) -> StepPlan:
    """The plan the training simulator executes at step ``step`` (pure: no SimPy, no costs).

    The corpus stream is seeded as
    :func:`~libra_des.sim.training.simulator.simulate_training` seeds it
    (the data child of the scenario seed's three spawned streams), and WLB-LLM's deferral queue
    is carried from step to step, so ``step_plan(sc, step=s)`` is the plan of step ``s`` of
    ``simulate(sc)``. MoE scenarios plan per layer inside the run and are refused here.
    """
    import numpy as np

    from libra_des.plan.step import build_step_plan
    from libra_des.sim.training.simulator import resolved_scenario
    from libra_des.workload.packing import make_stream

    if not is_int(step) or not 0 <= step <= MAX_PLAN_STEP:
        raise InputError("step", step, f"an integer 0..{MAX_PLAN_STEP:,} (steps replayed)")
    loaded = config.require_training(load_scenario(scenario, overrides, seed),
                                     "step_plan() plans a training step")
    sc = resolved_scenario(loaded)  # ``auto`` TAP knobs as the run chooses them
    _hardware, data_rng, _noise = np.random.default_rng(sc.seed).spawn(3)
    stream = make_stream(sc.workload, data_rng)
    built = build_step_plan(sc, stream, None)
    for _ in range(step):
        built = build_step_plan(sc, stream, built.deferred)
    return built


def fabric_for(
    profile: Profile, topology: str | None, group: int, gpus_per_node: int | None
) -> Fabric:
    """The fabric of ``topology`` (or the profile's machine), grown to fit ``group`` GPUs."""
    from libra_des.hardware.topology import load_topology

    name = topology or profile.interconnect.topology
    if name is None:
        per_node = gpus_per_node or profile.interconnect.gpus_per_node
        return profile.interconnect.fabric(max(1, math.ceil(group / per_node)))
    topo = load_topology(name)
    per_node = gpus_per_node or min(group, topo.gpus_per_node)
    needed = math.ceil(group / max(per_node, 1))
    if needed > topo.nodes:
        topo = load_topology(name, {"nodes": needed})
    return topo.fabric()


def cost_model(
    profile: str | None = None,
    topology: str | None = None,
    group: int = 1,
    gpus_per_node: int | None = None,
    efficiency: bool = True,
) -> CostModel:
    """The cost model ``libra-des cost`` queries: a profile (default H200 SXM) on a fabric.

    ``efficiency=False`` is ``--no-fit``: datasheet α-β without fitted efficiencies.
    """
    from libra_des.hardware.costs import CostModel
    from libra_des.hardware.profile import load_profile

    for name, ref in (("profile", profile), ("topology", topology)):
        if ref is not None and not isinstance(ref, str | os.PathLike):
            raise InputError(name, ref, "a shipped name or a file path")
    if not is_int(group) or group < 1:
        raise InputError("group", group, "a positive integer number of GPUs")
    if gpus_per_node is not None and (not is_int(gpus_per_node) or gpus_per_node < 1):
        raise InputError("gpus_per_node", gpus_per_node, "a positive integer")
    prof = load_profile(profile)
    return CostModel(prof, fabric_for(prof, topology, group, gpus_per_node), efficiency)


def cost_report(
    op: str,
    *,
    nbytes: float | None = None,
    group: int = 1,
    gpus_per_node: int | None = None,
    algorithm: str | None = None,
    doc_lengths: Sequence[int] | None = None,
    heads: int | None = None,
    kv_heads: int | None = None,
    head_dim: int = 128,
    cp: int = 1,
    backward: bool = False,
    gemm: tuple[int, int, int] | None = None,
    dtype: str = "bf16",
    profile: str | None = None,
    topology: str | None = None,
    efficiency: bool = True,
) -> CostReport:
    """One operation priced as ``libra-des cost`` reports it: seconds, the ``--json`` fields
    and the printed line (:class:`~libra_des.hardware.cost_ops.CostReport`).

    ``op`` is a registered cost op (:func:`cost_ops`): a collective (``all_reduce``,
    ``all_to_all``, ...) needs ``nbytes`` (nccl-tests' size) and ``group``; ``attention``
    needs ``doc_lengths`` and ``heads``; ``gemm`` needs ``gemm=(m, n, k)``.
    """
    from libra_des.hardware import cost_ops
    from libra_des.hardware.cost_ops import CostQuery

    priced = cost_ops.get(op)
    model = cost_model(profile, topology, group, gpus_per_node, efficiency)
    query = CostQuery(nbytes, group, gpus_per_node, algorithm, doc_lengths, heads, kv_heads,
                      head_dim, cp, backward, gemm, dtype)
    return priced.price(model, query, op)


def cost(op: str, **arguments: Any) -> float:
    """Seconds of one operation, as ``libra-des cost --json`` reports them (the arguments of
    :func:`cost_report`; for the chosen algorithm or bus bandwidth use it or
    :func:`cost_model`)."""
    return cost_report(op, **arguments).seconds


def cost_ops() -> tuple[CostOp, ...]:
    """The registered cost ops, in ``libra-des cost --op``'s order."""
    from libra_des.hardware import cost_ops as registry

    return registry.REGISTRY.items()


def cost_choices() -> dict[str, tuple[str, ...]]:
    """The names ``libra-des cost`` offers: ops, collective algorithms and GEMM dtypes."""
    from libra_des.hardware.collectives import ALGORITHMS
    from libra_des.hardware.profile import DTYPE_BYTES

    return {"op": tuple(o.name for o in cost_ops()), "algorithm": ALGORITHMS,
            "dtype": tuple(DTYPE_BYTES)}


# ----------------------------------------------------------------------------- studies
#: A sweep axis: keys that move together, each with its values (one key: a plain grid axis).
#: A value that is a string is YAML text as ``--set`` reads it; any other value goes as JSON.
AxisLike = Mapping[str, Sequence[Any]]


@dataclass(frozen=True)
class SweepPoint:
    """One finished point of :func:`run_sweep`: axis coordinates, overrides, ``result.json``."""

    coords: tuple[int, ...]
    overrides: Mapping[str, Any]
    result: Mapping[str, Any]


@dataclass(frozen=True)
class SweepRun:
    """The points of one :func:`run_sweep` in expansion order; how many ran and were reused."""

    points: tuple[SweepPoint, ...]
    ran: int
    reused: int
    seconds: float


def run_sweep(
    scenario: str | os.PathLike[str],
    axes: Sequence[AxisLike],
    out: str | os.PathLike[str],
    overrides: Iterable[str] = (),
    workers: int = 1,
) -> SweepRun:
    """Run (or resume) a grid as ``libra-des sweep SCENARIO --set ... --grid/--zip ... --out OUT``.

    The first axis is outermost. Points and their folder are exactly the command's (same
    ids, ``OUT/points/``, ``OUT/sweep.json``), so a rerun reuses finished points. Bad input
    raises :class:`InputError` before any work; a failed point raises ``RuntimeError``.
    """
    from libra_des.runs.sweep import Axis, SweepSpec, timed_sweep

    if not is_int(workers) or workers < 1:
        raise InputError("workers", workers, "an integer >= 1 (local worker processes)")
    grid = []
    for axis in axes:
        if not isinstance(axis, Mapping) or not axis:
            raise InputError("axes", axis, "a mapping {dotted key: [values]} per axis")
        columns = [[v if isinstance(v, str) else json.dumps(v) for v in axis[k]] for k in axis]
        if len({len(c) for c in columns}) != 1:
            raise InputError("axes", dict(axis), "keys of one axis with equally many values")
        grid.append(Axis(tuple(axis), tuple(zip(*columns, strict=True))))
    spec = SweepSpec(str(scenario), tuple(override_texts(overrides)), tuple(grid))
    result, seconds = timed_sweep(spec, Path(out), workers)
    points = tuple(SweepPoint(r.point.coords, MappingProxyType(r.point.override_values()),
                              MappingProxyType(r.result())) for r in result.records)
    return SweepRun(points, result.ran, result.reused, seconds)


def replay_plans(workload: str | None = None, **settings: Any) -> dict[str, Any]:
    """The configuration simulator: what ``libra-des plan ... --json`` prints, as a dict.

    ``{"windows": N, "slack": tau, "results": [one row per (policy, P, H, B)]}``. The keywords
    are :func:`libra_des.runs.plan_replay.settings`'s (``scenario``, ``overrides``, ``model``,
    ``gbs``, ``cp``, ``pool_sizes``, ``heads_splits``, ``block_sizes``, ``policies``, ``windows``,
    ``seed``); a value left out takes the default, or the scenario's with ``scenario``.
    """
    import inspect

    from libra_des.runs.plan_replay import replay
    from libra_des.runs.plan_replay import settings as resolve

    known = [k for k in inspect.signature(resolve).parameters if k != "workload"]
    for key in settings:
        if key not in known:
            raise InputError("replay_plans", key, ", ".join(known))
    if "overrides" in settings:
        settings["overrides"] = override_texts(settings["overrides"])
    if settings.get("scenario") is not None:
        settings["scenario"] = str(settings["scenario"])
    s = resolve(workload, **settings)
    return {"windows": s.windows, "slack": s.slack, "results": replay(s)}


def moe_systems() -> dict[str, str]:
    """The shipped MoE systems (``balancer.policy`` names) and their names in words, in the
    order figures and tables list them (docs/model.md part B)."""
    from libra_des.plan.moe.registry import BUILTIN, moe_system

    return {name: moe_system(name).label for name in BUILTIN}


def noise_factors(gpus: int, steps: int, seed: int = 0) -> np.ndarray:
    """Per-GPU noise factors of the calibrated variance model (default ``variance:``) for
    identical work: a [steps, gpus] array, one multiplicative factor per GPU per step."""
    import numpy as np

    from libra_des.config import VarianceSpec
    from libra_des.hardware.variance import VarianceModel

    for name, value in (("gpus", gpus), ("steps", steps)):
        if not is_int(value) or not 1 <= value <= 1 << 20:
            raise InputError(name, value, "an integer 1..1,048,576")
    rng = np.random.default_rng(seed)
    model = VarianceModel.build(VarianceSpec(), gpus, rng)
    ids = np.arange(gpus)
    return np.vstack([model.factors(rng, ids, 1, step) for step in range(steps)])


# ----------------------------------------------------------------------------- commands
#: What the commands (``cli.py``, ``commands/``) use besides the functions above, by the
#: module that defines it (``public=attribute`` where the API names it apart): the commands
#: reach the package only through this module (``tests/test_architecture.py``), and a name's
#: module is imported on its first use (PEP 562), so a short command loads only what it uses.
COMMAND_FACE: Mapping[str, tuple[str, ...]] = {
    "libra_des.base.storage": ("dumps", "write_atomic"),
    "libra_des.config": ("ROOT", "TrainingScenario", "include", "read_yaml", "require_training"),
    "libra_des.config.validation": (
        "MAX_GPUS", "MAX_SEED", "MAX_TOKENS", "check_output_dir", "check_output_file",
    ),
    "libra_des.hardware.costs": ("CostModel",),
    "libra_des.hardware.fitting": ("FitResult", "fit_profile", "group_samples", "sample_size"),
    "libra_des.hardware.importers": ("FORMATS", "import_files"),
    "libra_des.hardware.profile": (
        "Fit", "Profile", "Sourced", "check_device", "datasheet_for", "load_profile",
        "resolve_profile", "save_profile",
    ),
    "libra_des.hardware.profile_replay": ("replay_profile=replay", "summarise_replays=summarise"),
    "libra_des.hardware.topology": ("load_topology",),
    "libra_des.plan.balancers.registry": ("tap_users", "training_balancer=get"),
    "libra_des.plan.tap_autotune": ("Ranking",),
    "libra_des.sim.chakra.export": ("export_chakra=export",),
    "libra_des.sim.chakra.files": ("read_inputs", "write_folder"),
    "libra_des.sim.chakra.replay": ("replay_chakra=replay",),
    "libra_des.sim.training.simulator": ("choose_tap_knobs", "elaborate_cluster", "first_window"),
    "libra_des.results.outputs": (
        "RUN_RECORD", "check_ours", "check_report_path", "claim", "default_folder", "remove_stale",
    ),
    "libra_des.results.plausibility": ("check_numbers",),
    "libra_des.results.tables": ("write_run_table",),
    "libra_des.kinds": ("kind_of", "of_result"),
    "libra_des.kinds.preflight": ("check_feasible", "trace_ranks"),
    "libra_des.kinds.simulation": ("run_record", "simulate_scenario=simulate", "simulate_timed"),
    "libra_des.runs.plan_replay": (
        "DEFAULT_MODEL", "PLAN_POLICIES", "PlanSettings", "plan_settings=settings",
        "replay_windows=replay",
    ),
    "libra_des.runs.sweep": (
        "Executor", "PointRecord", "SweepResult", "SweepSpec", "default_workers", "local_executor",
        "parse_axis", "ray_executor", "resolve_sweep=resolve", "run_sweep_spec=run_sweep",
    ),
    "libra_des.runs.sweep_safety": ("MAX_WORKERS", "sigterm_as_interrupt"),
    "libra_des.calibrate.run": ("calibrate", "calibration_options=options", "torch_missing"),
    "libra_des.calibrate.sizes": ("ALL_OPS",),
    "libra_des.report": ("Drawer", "Source", "render"),
    "libra_des.report.figures": ("DRAWINGS", "Png", "sweep_figures=sweep"),
}
#: Public name -> (defining module, attribute).
FACE_NAMES = {pub: (module, attr or pub) for module, names in COMMAND_FACE.items()
              for pub, _, attr in (n.partition("=") for n in names)}



def __getattr__(name: str) -> Any:
    """A name of :data:`COMMAND_FACE`, imported from its module on first use."""
    found = FACE_NAMES.get(name)
    if found is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(found[0]), found[1])
