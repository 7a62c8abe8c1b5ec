"""Scenarios: load one, simulate it, plan one of its training steps (the API's core).

The same scenario and seed give the same result as ``libra-des run``, byte for byte (the run's
wall-clock time goes to ``run.json``, not the result): both go through
:func:`libra_des.kinds.simulation.simulate`. A scenario object is validated again before it runs,
so one changed with ``model_copy`` (which skips pydantic's validators) is checked too.
"""

from __future__ import annotations

import json
import numbers
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Union

import libra_des.config as config
from libra_des.base.identity import portable_paths
from libra_des.errors import InputError

if TYPE_CHECKING:
    from libra_des.config import Scenario, TrainingScenario
    from libra_des.plan.step import StepPlan

__all__ = [
    "MAX_PLAN_STEP", "Overrides", "Result", "ScenarioLike", "copy_scenario", "is_int",
    "load_scenario",
    "load_training", "override_texts", "plain", "shipped_path", "simulate", "step_plan",
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
    :mod:`libra_des.results.moe_metrics` for MoE prefill). ``trace`` is the Chrome trace when
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


def plain(value: Any) -> Any:
    """``value`` with numpy scalars (also inside lists, tuples and mappings) as Python's own
    numbers: an ``np.int64`` is accepted wherever an ``int`` is, and what it reaches (overrides,
    seeds, result.json) stays JSON text."""
    if isinstance(value, Mapping):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(plain(v) for v in value)
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return value.tolist()  # a numpy scalar -> int, float, bool or str; an array -> list
    return value


def checked_seed(seed: Any) -> int | None:
    """A seed argument: None, or an integer >= 0 (numpy's too), as Python's int."""
    seed = plain(seed)
    if seed is not None and (not is_int(seed) or seed < 0):
        raise InputError("seed", seed, "an integer >= 0 (numpy's random seed)")
    return None if seed is None else int(seed)


def override_texts(overrides: Overrides) -> list[str]:
    """``--set`` strings from either form; mapping values travel as JSON (a YAML subset)."""
    overrides = plain(overrides) if isinstance(overrides, Mapping) else overrides
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
    import libra_des.kinds as kinds
    from libra_des.config import ScenarioBase

    if not isinstance(scenario, ScenarioBase | str | os.PathLike) or isinstance(scenario, bytes):
        raise InputError("scenario", scenario, "a Scenario or the path of a scenario YAML")
    texts = override_texts(overrides)
    seed = checked_seed(seed)
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
    resolved: Scenario = kinds.elaborated(loaded)
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
    if trace_ranks is not None and (isinstance(trace_ranks, str | bytes)
                                    or not isinstance(trace_ranks, Iterable)):
        raise InputError("trace_ranks", trace_ranks, "integers >= 0 (rank groups)")
    ranks = [plain(r) for r in trace_ranks] if trace_ranks is not None else None
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

    step = plain(step)
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


def load_training(scenario: ScenarioLike, overrides: Overrides, why: str) -> TrainingScenario:
    """:func:`load_scenario` of a training scenario; any other kind is refused with ``why``."""
    return config.require_training(load_scenario(scenario, overrides), why)


def shipped_path(relative: str) -> Path:
    """A file shipped with the package (``scenarios/quickstart.yaml``), by its path relative to
    the repository root."""
    if not isinstance(relative, str | os.PathLike):
        raise InputError("relative", relative, "a path relative to the repository root (text)")
    return config.ROOT / relative


def copy_scenario(name: str, folder: str | os.PathLike[str]) -> Path:
    """Copy the shipped scenario ``name`` (``quickstart``) into ``folder`` as ``NAME.yaml``,
    the file's text unchanged (its comments say where each value comes from), and return the
    new file's path.

    The copy loads from ``folder`` as the shipped file does: a model, workload or topology it
    names by shipped name resolves next to the copy first, then in the current folder, then
    among the shipped files, so it keeps working unless the user puts a file of that name
    beside it (which is the point of a copy). This is checked: the copy must load to the same
    scenario as the shipped file. ``folder`` follows the output-folder policy (new, empty, or
    the tool's with ``NAME.yaml`` its own unchanged); anything else is refused, never
    overwritten.
    """
    from libra_des.base.ownership import record_write
    from libra_des.config.loading import shipped_names
    from libra_des.config.validation import check_output_dir

    names = shipped_names("scenarios")
    if not isinstance(name, str) or name not in names:
        raise InputError("NAME", name, f"a shipped scenario name ({', '.join(names)})")
    if not isinstance(folder, str | os.PathLike):
        raise InputError("DIR", folder, "a folder path")
    source = config.ROOT / "scenarios" / f"{name}.yaml"
    target = Path(folder) / source.name
    check_output_dir(Path(folder), "DIR", (source.name,))
    record_write(target, source.read_bytes())
    if load_scenario(target).model_dump() != load_scenario(source).model_dump():
        raise RuntimeError(f"{target} does not load as the shipped {name} does")  # a bug
    return target
