"""The scenario-kind registry: what each kind of scenario does, so no caller branches on kind.

A scenario kind (training, MoE prefill) is a validated model of
:mod:`libra_des.config` (``SCENARIO_KINDS``: each with only its own knobs) plus the behaviour
the layers above the config need, declared once in a :class:`ScenarioKind`:

* ``elaborate``: the checks that need registries above the config layer (an MoE system's
  name, a training balancer's name, pool rule and own config model), run before any work;
  it returns the scenario to run (a training balancer's section in its own model);
* ``simulate``: the scenario in, its ``result.json`` dict (and the trace asked for) out, the
  plausibility checks of :mod:`libra_des.results.plausibility` applied;
* ``metrics``: the headline keys of a result (sweep index and report columns);
* ``summary``: the ``libra-des run`` table rows of a result;
* ``estimate`` and ``trace_ranks``: the preflight of :mod:`libra_des.kinds.preflight`.

``simulation.py``, ``sweep.py``, ``preflight.py``, the API (``api/``) and the report
look the kind up (:func:`kind_of`, :func:`get`). The shipped kinds are the modules of
:data:`BUILTIN`, imported by name on the first look-up, so that importing this registry
stays cheap and ``simulation``/``preflight`` can import it while the kinds import them.
"""

from __future__ import annotations

import importlib
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from libra_des.registry import Registry

if TYPE_CHECKING:
    import numpy as np

    from libra_des.config import Scenario, ScenarioBase
    from libra_des.hardware.profiles.profile import Profile
    from libra_des.kinds.estimate import Estimate

#: The modules that register the shipped kinds.
BUILTIN = ("libra_des.kinds.training", "libra_des.kinds.moe")

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


class KindRegistry(Registry[ScenarioKind]):
    """Scenario kinds by name; :meth:`names` in the config's order (``SCENARIO_KINDS``),
    whatever the order their modules were imported in."""

    def names(self) -> tuple[str, ...]:
        from libra_des.config import SCENARIO_KINDS  # lazy: the scenario models (start-up)

        order = {name: i for i, name in enumerate(SCENARIO_KINDS)}
        return tuple(sorted(super().names(), key=lambda n: order.get(n, len(order))))


def load_kinds(_registry: Registry[ScenarioKind]) -> None:
    """Import the shipped kinds' modules: each registers its kind (in :data:`REGISTRY`)."""
    for module in BUILTIN:
        importlib.import_module(module)


#: The process's registry (a plug-in registry is the one piece of module state by design).
REGISTRY = KindRegistry("scenario kind", "kind", load_kinds)
register = REGISTRY.register
names = REGISTRY.names
get = REGISTRY.get


def kind_of(scenario: Scenario) -> ScenarioKind:
    """The registered kind of a validated scenario."""
    return get(scenario.kind)


#: Scenarios :func:`elaborated` returned, by ``id`` (weak: a dropped scenario leaves no trace).
#: A run elaborates once: a scenario already here is run as it is.
_ELABORATED: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()


def elaborated(scenario: Scenario) -> Scenario:
    """The scenario its kind's ``elaborate`` gives, elaborating it only once: loading a
    scenario (the API, a sweep) elaborates it, and running that scenario does not again."""
    if _ELABORATED.get(id(scenario)) is scenario:
        return scenario
    resolved: Scenario = kind_of(scenario).elaborate(scenario)
    _ELABORATED[id(resolved)] = resolved
    return resolved


def of_result(result: Mapping[str, Any]) -> ScenarioKind:
    """The registered kind of a ``result.json`` (its ``kind`` key)."""
    return get(result.get("kind"))
