"""Grids of runs as ``libra-des sweep`` drives them: the spec from its axes, the executor
(local processes or Ray), every point resolved before any work, the resumable run.

:mod:`libra_des.runs.sweep` does the work (:func:`libra_des.api.run_sweep` is the scripts'
form); every function here imports it inside its body.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from libra_des.runs.sweep import Executor as Executor
    from libra_des.runs.sweep import Point as Point
    from libra_des.runs.sweep import PointRecord as PointRecord
    from libra_des.runs.sweep import SweepResult as SweepResult
    from libra_des.runs.sweep import SweepSpec as SweepSpec

__all__ = [
    "default_workers", "max_workers", "resolve_sweep", "run_sweep_points",
    "sigterm_as_interrupt", "sweep_executor", "sweep_spec",
]


def default_workers() -> int:
    """Local worker processes when none are asked for: min(2, CPUs)."""
    from libra_des.runs.sweep import default_workers as workers

    return workers()


def max_workers() -> int:
    """The most local worker processes a sweep starts."""
    from libra_des.runs.sweep_safety import MAX_WORKERS

    return MAX_WORKERS


def sweep_spec(scenario: str, axes: Sequence[tuple[str, str]], base: Sequence[str] = ()
               ) -> SweepSpec:
    """A sweep from ``(kind, text)`` axes in command-line order (first outermost): kind
    ``grid`` is ``KEY=V1,V2``, ``zip`` is ``K1=A,B;K2=C,D``; ``base`` overrides every point."""
    from libra_des.runs.sweep import SweepSpec, parse_axis

    parsed = tuple(parse_axis(text, zipped=kind == "zip") for kind, text in axes)
    return SweepSpec(scenario=scenario, base=tuple(base), axes=parsed)


def sweep_executor(ray: bool, workers: int = 1) -> Executor:
    """Ray tasks on the cluster ``ray.init()`` finds, or ``workers`` local processes."""
    from libra_des.runs.sweep import local_executor, ray_executor

    return ray_executor() if ray else local_executor(workers)


def resolve_sweep(spec: SweepSpec) -> list[Point]:
    """Every point validated (each raises the scenario's own one-line error) before any work."""
    from libra_des.runs.sweep import resolve

    return resolve(spec)


def run_sweep_points(spec: SweepSpec, out: Path, executor: Executor,
                     advance: Callable[[int], None], points: Sequence[Point]) -> SweepResult:
    """Run (or resume) the resolved points into ``out``; ``advance(n)`` as points finish."""
    from libra_des.runs.sweep import run_sweep

    return run_sweep(spec, out, executor, advance, points)


def sigterm_as_interrupt() -> AbstractContextManager[None]:
    """SIGTERM handled as Ctrl-C while a sweep runs (finished points are kept)."""
    from libra_des.runs.sweep_safety import sigterm_as_interrupt as interrupt

    return interrupt()
