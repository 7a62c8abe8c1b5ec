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
look the kind up (:func:`kind_of`, :func:`get`). A kind's module builds its
:class:`~libra_des.kinds.kind.ScenarioKind` (``kinds/kind.py``, below this registry);
``kinds/shipped.py`` lists the shipped ones, named by :data:`BUILTIN` and imported on the
first look-up, so that importing this registry stays cheap and no kind imports the registry
that lists it (``simulation``/``feasibility`` import the registry; the kinds import neither).
"""

from __future__ import annotations

import importlib
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from libra_des.kinds.kind import ScenarioKind as ScenarioKind
from libra_des.kinds.kind import no_checks as no_checks
from libra_des.registry import Registry

if TYPE_CHECKING:
    from libra_des.config import Scenario

#: The module whose ``SHIPPED`` lists the shipped kinds (named, not imported: importing this
#: registry stays cheap, and the kinds' modules never import it).
BUILTIN = "libra_des.kinds.shipped"


class KindRegistry(Registry[ScenarioKind]):
    """Scenario kinds by name; :meth:`names` in the config's order (``SCENARIO_KINDS``),
    whatever the order their modules were imported in."""

    def names(self) -> tuple[str, ...]:
        from libra_des.config import SCENARIO_KINDS  # lazy: the scenario models (start-up)

        order = {name: i for i, name in enumerate(SCENARIO_KINDS)}
        return tuple(sorted(super().names(), key=lambda n: order.get(n, len(order))))


def load_kinds(registry: Registry[ScenarioKind]) -> None:
    """Register the shipped kinds (:data:`BUILTIN`'s ``SHIPPED``, in order)."""
    for kind in importlib.import_module(BUILTIN).SHIPPED:
        registry.register(kind)


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
_ELABORATED: weakref.WeakValueDictionary[int, Scenario] = weakref.WeakValueDictionary()


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
