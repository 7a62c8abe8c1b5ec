"""Why run A beats run B (``libra-des explain``, the report of several runs): two training
results' step times and attention stragglers, their difference split into components that add
up to it (:mod:`libra_des.results.attribution`; the parts each run records are defined in
:mod:`libra_des.sim.training.attribution`).

The layers doing the work are imported inside the functions (``import libra_des.api`` stays
cheap).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from libra_des.results.attribution import Explanation as Explanation

__all__ = ["components", "explain", "explain_results", "explain_runs", "load_result"]

PathLike = str | os.PathLike[str]


def components() -> tuple[str, ...]:
    """The components a difference is split into, in the order reports show them."""
    from libra_des.results.attribution import COMPONENTS

    return COMPONENTS


def load_result(path: PathLike, field: str = "RESULT") -> dict[str, Any]:
    """A ``result.json``, or a run folder holding one, read strictly (one InputError line
    naming ``field`` for a missing, unreadable or implausible file)."""
    from libra_des.errors import InputError
    from libra_des.results.tables import read_result

    p = Path(path)
    if p.is_dir():
        p = p / "result.json"
    if not p.is_file():
        raise InputError(field, str(path), "a result.json file or a run folder holding one")
    return read_result(p, field)


def explain(a: PathLike, b: PathLike, only: Sequence[str] | None = None) -> Explanation:
    """Run A (a result.json or run folder) against run B: each measure's difference split into
    components (``only``: keep just these; the sum check then covers only them).

    Bad input (InputError, before any work): unknown components, unreadable files, results
    that are not training's or that lack the recorded split, runs of different clusters or
    workloads."""
    from libra_des.errors import InputError
    from libra_des.results.attribution import COMPONENTS

    unknown = [c for c in (only or ()) if c not in COMPONENTS]
    if unknown:
        raise InputError("--components", ",".join(unknown), ", ".join(COMPONENTS))
    ra, rb = load_result(a, "RESULT_A"), load_result(b, "RESULT_B")
    return explain_results(ra, rb, (str(a), str(b)), only)


def explain_results(a: Mapping[str, Any], b: Mapping[str, Any],
                    names: tuple[str, str] = ("RESULT_A", "RESULT_B"),
                    only: Sequence[str] | None = None) -> Explanation:
    """:func:`explain` on results already loaded (result dicts, e.g. ``simulate``'s)."""
    from libra_des.results.attribution import explain_results as split

    return split(a, b, names, only)


def explain_runs(results: Mapping[str, Mapping[str, Any]]) -> list[Explanation]:
    """The report's pairs among named runs: the fastest run against every other training run
    of the same cluster and workload (others are left out)."""
    from libra_des.results.attribution import explain_pairs

    return explain_pairs(results)
