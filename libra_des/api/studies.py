"""Studies (what ``paper_figs/`` draws from): grids of runs, planner replays, the MoE systems and
the calibrated variance model.

:func:`run_sweep` runs a grid as ``libra-des sweep`` does (same resumable folder),
:func:`replay_plans` is ``libra-des plan --json``, :func:`moe_systems` names the shipped MoE
systems and :func:`noise_factors` draws the calibrated variance model directly.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypedDict

from libra_des.api.scenarios import checked_seed, is_int, override_texts, plain
from libra_des.errors import InputError

if TYPE_CHECKING:
    import numpy as np

    from libra_des.runs.sweep import Axis

__all__ = [
    "AxisLike", "PlanReplay", "SweepPoint", "SweepRun", "moe_systems", "noise_factors",
    "replay_plans", "run_sweep",
]


class PlanReplay(TypedDict):
    """What ``libra-des plan --json`` prints: the windows replayed, the slack, one row per
    (policy, P, H, B) (:func:`libra_des.runs.plan_replay.replay` defines the row)."""

    windows: int
    slack: float
    results: list[dict[str, Any]]


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
    from libra_des.runs.sweep import SweepSpec, timed_sweep

    workers = plain(workers)
    if not is_int(workers) or workers < 1:
        raise InputError("workers", workers, "an integer >= 1 (local worker processes)")
    for name, where in (("scenario", scenario), ("out", out)):
        if not isinstance(where, str | os.PathLike):
            raise InputError(name, where, "a path (str or os.PathLike)")
    if isinstance(axes, str | bytes | Mapping) or not isinstance(axes, Sequence):
        raise InputError("axes", axes, "a list of mappings {dotted key: [values]}, one per axis")
    grid = tuple(sweep_axis(axis) for axis in axes)
    spec = SweepSpec(str(scenario), tuple(override_texts(overrides)), grid)
    result, seconds = timed_sweep(spec, Path(out), workers)
    points = tuple(SweepPoint(r.point.coords, MappingProxyType(r.point.override_values()),
                              MappingProxyType(r.result())) for r in result.records)
    return SweepRun(points, result.ran, result.reused, seconds)


def sweep_axis(axis: Any) -> Axis:
    """One axis of :func:`run_sweep`: dotted keys, each with as many values (YAML text as
    ``--set`` reads it, or a value that goes as JSON; numpy scalars as Python's numbers)."""
    from libra_des.runs.sweep import Axis

    if not isinstance(axis, Mapping) or not axis:
        raise InputError("axes", axis, "a mapping {dotted key: [values]} per axis")
    columns = []
    for key, values in axis.items():
        if not isinstance(key, str) or not key:
            raise InputError("axes", key, "dotted scenario keys (text) per axis")
        if isinstance(values, str | bytes | Mapping) or not isinstance(values, Sequence):
            raise InputError(f"axes.{key}", values, "a list of values")
        try:
            columns.append([v if isinstance(v, str) else json.dumps(plain(v)) for v in values])
        except (TypeError, ValueError):
            raise InputError(f"axes.{key}", values, "JSON-able values (number, text, list, "
                             "map)") from None
    if len({len(c) for c in columns}) != 1 or not columns[0]:
        raise InputError("axes", dict(axis), "keys of one axis with equally many values (>= 1)")
    return Axis(tuple(axis), tuple(zip(*columns, strict=True)))


def replay_plans(workload: str | None = None, **settings: Any) -> PlanReplay:
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
    from libra_des.hardware.variance.model import VarianceModel

    gpus, steps, entropy = plain(gpus), plain(steps), checked_seed(seed)
    if entropy is None:  # no seed would draw different factors on every call
        raise InputError("seed", seed, "an integer >= 0 (numpy's random seed)")
    for name, value in (("gpus", gpus), ("steps", steps)):
        if not is_int(value) or not 1 <= value <= 1 << 20:
            raise InputError(name, value, "an integer 1..1,048,576")
    if gpus * steps > 1 << 26:
        raise InputError("gpus * steps", gpus * steps, f"at most {1 << 26:,} factors "
                         "(about 0.5 GB; our bound)")
    rng = np.random.default_rng(entropy)
    model = VarianceModel.build(VarianceSpec(), gpus, rng)
    ids = np.arange(gpus)
    return np.vstack([model.factors(rng, ids, 1, step) for step in range(steps)])
