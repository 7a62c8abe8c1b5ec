"""What a scenario kind declares (:class:`ScenarioKind`), below the kind registry
(:mod:`libra_des.kinds`) and the kinds' modules, so a kind's module builds its declaration
without importing the registry that lists it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from libra_des.config import ScenarioBase
    from libra_des.hardware.profiles.profile import Profile
    from libra_des.kinds.estimate import Estimate

#: (scenario, its loaded profile, seeded generator, wall-clock start, progress bar, want a
#: trace, trace ranks) -> (result.json dict, trace or None).
Simulate = Callable[
    [Any, "Profile", "np.random.Generator", float, bool, bool, "list[int] | None"],
    "tuple[dict[str, Any], dict[str, Any] | None]",
]
#: (scenario, --trace given, --trace-ranks text, its integers) -> ranks to trace or None.
TraceRanks = Callable[[Any, bool, "str | None", "list[int] | None"], "list[int] | None"]


def no_checks(scenario: Any) -> Any:
    """A kind whose every rule the config layer already checks: the scenario as it is."""
    return scenario


@dataclass(frozen=True)
class ScenarioKind:
    """What one scenario kind declares (see the module docstring for each part)."""

    name: str
    model: type[ScenarioBase]
    simulate: Simulate = field(compare=False)
    metrics: tuple[str, ...]
    summary: Callable[[Mapping[str, Any]], list[tuple[str, str]]] = field(compare=False)
    estimate: Callable[[Any], Estimate] = field(compare=False)
    trace_ranks: TraceRanks = field(compare=False)
    elaborate: Callable[[Any], Any] = field(default=no_checks, compare=False)
