"""libra-des: a discrete-event GPU-cluster simulator for the Libra papers.

Layers (imports point downwards only): ``cli`` -> ``sim`` -> ``plan`` / ``hardware``
-> ``workload`` -> ``config``. See ``docs/architecture.md``.

The Python API (:mod:`libra_des.api`) is exported here lazily, so ``import libra_des`` stays
cheap: ``simulate``, ``load_scenario``, ``step_plan``, ``cost``, ``cost_model`` and ``Result``, plus
the error types ``InputError`` and ``CheckError``, and ``load_sweep`` (a sweep folder as a pandas
DataFrame, :mod:`libra_des.results.tables`), and ``tune_process`` (the commands' process-wide
speed settings, for a process of your own: importing and calling the library never changes
the collector, the C heap or numba's settings). (The step planner is ``step_plan``, not
``plan``: ``libra_des.plan`` is the planners' subpackage and would shadow a function.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from libra_des.base.version import __version__

#: Public names and the module that defines each (imported on first use).
_EXPORTS = {
    "Result": "libra_des.api",
    "cost": "libra_des.api",
    "cost_model": "libra_des.api",
    "cost_report": "libra_des.api",
    "load_scenario": "libra_des.api",
    "simulate": "libra_des.api",
    "step_plan": "libra_des.api",
    "tune_process": "libra_des.api",
    "InputError": "libra_des.errors",
    "CheckError": "libra_des.errors",
    "load_sweep": "libra_des.results.tables",
}

__all__ = [
    "CheckError", "InputError", "Result", "__version__",
    "cost", "cost_model", "cost_report", "load_scenario", "load_sweep", "simulate", "step_plan",
    "tune_process",
]

if TYPE_CHECKING:
    from libra_des.api import (
        Result,
        cost,
        cost_model,
        cost_report,
        load_scenario,
        simulate,
        step_plan,
        tune_process,
    )
    from libra_des.errors import CheckError, InputError
    from libra_des.results.tables import load_sweep


def __getattr__(name: str) -> Any:
    """Import a public name's module on first access (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'libra_des' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    """The public API with the module's own names, so ``dir(libra_des)`` shows what to use."""
    return sorted({*globals(), *__all__})
