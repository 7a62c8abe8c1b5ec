"""The first look at a run's data, taken once.

Elaborating a training scenario peeks at its first GBS window (the memory floor is checked
on it before any work, so a sweep refuses before its first point); preparing the run peeks
at the same window again to plan. Both draw it from the same stream (the seed's middle
child), so the elaboration keeps its stream here, by the scenario's identity, and the run
goes on from it: the window is sampled once per run. Taken at most once (a second run of
the same scenario object draws its own, identically); dropped when the scenario is.
"""

from __future__ import annotations

import weakref
from typing import Any

from libra_des.workload.packing import CorpusStream

#: Scenario id -> (a weak reference to the scenario, its data stream with the first window
#: peeked). The reference tells a reused id apart and drops the entry with the scenario.
_KEPT: dict[int, tuple[weakref.ref[Any], CorpusStream]] = {}


def keep(scenario: Any, stream: CorpusStream) -> None:
    """Keep ``stream`` (its first window peeked) for ``scenario``'s run."""
    key = id(scenario)
    _KEPT[key] = (weakref.ref(scenario, lambda _ref: _KEPT.pop(key, None)), stream)


def take(scenario: Any) -> CorpusStream | None:
    """The stream kept for ``scenario`` (removed: a run takes it once), else None."""
    entry = _KEPT.pop(id(scenario), None)
    if entry is None or entry[0]() is not scenario:
        return None
    return entry[1]
