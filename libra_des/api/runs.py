"""One run as ``libra-des run`` and ``quickstart`` drive it: the preflight, the trace's rank
groups, the timed simulation, its record, its headline rows and its tables.

Each function imports the layer that does the work inside its body (the kinds and the
simulator are heavy), so importing this module costs nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from libra_des.config import Scenario
    from libra_des.kinds.estimate import Estimate as Estimate

__all__ = [
    "check_feasible", "run_record", "simulate_scenario", "simulate_timed", "summary_rows",
    "trace_ranks", "write_run_table",
]

#: A run's outcome: (result.json mapping, Chrome trace or None, wall-clock record).
TimedRun = tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any]]


def check_feasible(scenario: Scenario) -> Estimate:
    """The preflight's memory and time estimate; refuses (exit 2) a run this machine cannot
    hold or finish in a day (:mod:`libra_des.kinds.preflight`)."""
    from libra_des.kinds.feasibility import check_feasible as check

    return check(scenario)


def trace_ranks(scenario: Scenario, want_trace: bool, text: str | None,
                parsed: list[int] | None) -> list[int] | None:
    """``--trace``/``--trace-ranks`` checked against the scenario: the rank groups to trace."""
    from libra_des.kinds.feasibility import trace_ranks as ranks

    return ranks(scenario, want_trace, text, parsed)


def simulate_scenario(scenario: Scenario, progress: bool = False,
                      trace_ranks: list[int] | None = None, want_trace: bool = False
                      ) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(result, trace or None) of a validated scenario: the one simulation entry."""
    from libra_des.kinds.simulation import simulate

    return simulate(scenario, progress, trace_ranks, want_trace)


def simulate_timed(scenario: Scenario, progress: bool = False,
                   trace_ranks: list[int] | None = None, want_trace: bool = False) -> TimedRun:
    """:func:`simulate_scenario` plus the run's wall-clock record (``run.json``'s)."""
    from libra_des.kinds.simulation import simulate_timed as timed

    return timed(scenario, progress, trace_ranks, want_trace)


def run_record(timing: dict[str, Any], files: list[str]) -> dict[str, Any]:
    """``run.json``: the wall clock of a run and the files it wrote."""
    from libra_des.kinds.simulation import run_record as record

    return record(timing, files)


def summary_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """The headline (metric, value) rows of the result's kind (:mod:`libra_des.kinds`)."""
    from libra_des.kinds import of_result

    return of_result(result).summary(result)


def write_run_table(result: dict[str, Any], folder: Path) -> list[Path]:
    """``result.csv`` (and ``result.parquet`` with the tables extra) of one result."""
    from libra_des.results.tables import write_run_table as write

    return write(result, folder)
