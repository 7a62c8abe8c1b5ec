"""A scenario over several seeds (``run --seeds N``, ``quickstart --seeds N``).

The seeds derive from the scenario's seed (:mod:`libra_des.results.spread`); the first run is
the single-seed run unchanged, and its result gains a ``seeds`` section with every headline
metric's spread. A speed-up between two such runs is paired per seed, with a t interval.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from libra_des.api.numbers import show
from libra_des.errors import InputError

if TYPE_CHECKING:
    from libra_des.config import Scenario

__all__ = ["SeededRun", "check_seeds", "run_seeds", "seed_speedup", "seeds_text",
           "seeds_title", "with_speedup"]


@dataclass(frozen=True)
class SeededRun:
    """The first seed's result with its ``seeds`` section, and every seed's result and
    wall-clock record (in seed order)."""

    result: dict[str, Any]
    results: tuple[dict[str, Any], ...]
    timings: tuple[dict[str, Any], ...]
    trace: dict[str, Any] | None


def check_seeds(value: object) -> int:
    """``--seeds``: an integer from 1 to :data:`~libra_des.results.spread.MAX_SEEDS` (text
    as the command got it, or an int); anything else is bad input."""
    from libra_des.results.spread import MAX_SEEDS

    allowed = f"an integer from 1 to {MAX_SEEDS}"
    if isinstance(value, bool):
        raise InputError("--seeds", value, allowed)
    if isinstance(value, str):
        text = value.strip()
        if not text.isdigit():
            raise InputError("--seeds", value, allowed)
        value = int(text)
    if not isinstance(value, int) or not 1 <= value <= MAX_SEEDS:
        raise InputError("--seeds", value, allowed)
    return value


def run_seeds(scenario: Scenario, count: int, progress: bool = False,
              trace_ranks: list[int] | None = None, want_trace: bool = False,
              advance: Callable[[int], None] = lambda i: None) -> SeededRun:
    """Simulate ``scenario`` at ``count`` derived seeds; the trace is the first seed's.

    ``count`` 1 returns the single-seed run with no ``seeds`` section (byte-identical).
    """
    from libra_des.kinds import of_result
    from libra_des.kinds.simulation import simulate_timed
    from libra_des.results.spread import derive_seeds, seeds_section

    count = check_seeds(count)
    seeds = derive_seeds(scenario.seed, count)
    results, timings = [], []
    trace = None
    for i, seed in enumerate(seeds):
        advance(i)
        one = scenario if i == 0 else scenario.model_copy(update={"seed": seed})
        result, got, timing = simulate_timed(one, progress and i == 0, trace_ranks,
                                             want_trace and i == 0)
        trace = got if i == 0 else trace
        results.append(result)
        timings.append(timing)
    first = results[0]
    if count > 1:
        steps = int(getattr(scenario, "steps", 1))
        first = {**first, "seeds": seeds_section(seeds, steps, results,
                                                 of_result(first).metrics)}
    return SeededRun(first, tuple(results), tuple(timings), trace)


def seed_speedup(baseline: SeededRun, run: SeededRun, metric: str) -> dict[str, Any]:
    """``baseline``'s ``metric`` over ``run``'s, paired per seed, with its t interval."""
    from libra_des.results.spread import lookup, paired_ratio

    num = [lookup(r, metric) for r in baseline.results]
    den = [lookup(r, metric) for r in run.results]
    if any(v is None for v in (*num, *den)):
        raise InputError("metric", metric, "a number every seed's result holds")
    return paired_ratio([float(v) for v in num if v is not None],
                        [float(v) for v in den if v is not None])


def with_speedup(run: SeededRun, baseline: SeededRun, baseline_name: str,
                 metric: str = "step_time_s.mean") -> dict[str, Any]:
    """``run``'s result whose ``seeds`` section gains ``speedup``: ``baseline``'s ``metric``
    over ``run``'s, paired per seed (:func:`seed_speedup`); unchanged for one seed."""
    section = run.result.get("seeds")
    if not isinstance(section, dict):
        return run.result
    up = {"over": baseline_name, "metric": metric, **seed_speedup(baseline, run, metric)}
    return {**run.result, "seeds": {**section, "speedup": up}}


def seeds_text(result: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(metric, "mean ± std", "min – max") per headline metric of a result with a ``seeds``
    section (three significant digits with the unit); none without one."""
    section = result.get("seeds")
    if not isinstance(section, dict):
        return []
    return [(name, f"{show(s['mean'], name)} ± {show(s['std'], name)}",
             f"{show(s['min'], name)} – {show(s['max'], name)}")
            for name, s in section["metrics"].items()]


def seeds_title(result: dict[str, Any]) -> str:
    """"over N seeds, S steps each" of a result's ``seeds`` section ("" without one)."""
    section = result.get("seeds")
    if not isinstance(section, dict):
        return ""
    return f"over {section['count']} seeds, {section['steps']} step(s) each"
