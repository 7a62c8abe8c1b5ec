"""The MoE systems a scenario may name in ``balancer.policy``, found by look-up, never by name.

An MoE system is one module that builds a :class:`MoeSystem`: its name, the
:class:`MoeCapabilities` the simulator wires its layer from (predictor, replication, prefetch,
CPU planning, two stages, memory slots) and its per-layer plan function. The shipped systems
live in ``libra_des.plan.moe.catalog`` (one module each); a third party registers through the
``libra_des.moe_systems`` entry-point group (each entry point loads a :class:`MoeSystem`) or,
in-process, with :func:`register`. Entry points are loaded lazily, on the first look-up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from importlib.metadata import entry_points
from typing import Literal

import numpy as np

from libra_des.errors import InputError
from libra_des.plan.moe.assignment import MoeLayerPlan
from libra_des.plan.moe.systems import MoeSetup, Timer
from libra_des.registry import Registry

#: Entry-point group third-party MoE systems register under.
ENTRY_POINT_GROUP = "libra_des.moe_systems"
#: The shipped systems, in the order figures and tables list them (docs/model.md part B).
BUILTIN = ("sglang", "eplb", "lina", "harmoeny", "libra")


@dataclass(frozen=True)
class MoeCapabilities:
    """What a system does, which the layer builder turns into stages and costs.

    ``predictor``: the routing predictor it ships with (``None``: it plans without a
    prediction, and ``balancer.override_predictor`` is refused). ``replication``:
    ``"static"`` replicas laid out once from a profiling sample (EPLB's redundant experts,
    ``balancer.redundant_experts`` per layer), ``"dynamic"`` replicas planned per layer from the
    prediction, or ``"none"``. ``prefetch``: the next layer's replicas are copied during this
    one. ``fetch``: weights a plan needs are fetched from host memory after planning, in the
    same layer. ``cpu_plan``: a host planning step after the gate (and its metadata
    broadcast). ``two_stage``: local experts start before dispatch, remote work after the plan.
    ``memory_slots``: ``balancer.slots`` double-buffered expert slots are reserved per GPU.
    ``dispatch``: the token dispatch used when ``balancer.dispatch`` is ``auto``.
    ``kernels``: the grouped-GEMM kernel it ships for each ``model.dtype``
    (``hardware/compute/grouped_kernels.py``). The default is SGLang's: its Triton fused-MoE path
    for
    BF16 and DeepGEMM for FP8. Every shipped system keeps it: the Libra paper runs all of them
    in SGLang v0.4.10 (docs/model.md B), Lina and HarMoEny as its re-implementations there
    (our reading of its setup).
    """

    predictor: str | None = None
    replication: Literal["none", "static", "dynamic"] = "none"
    prefetch: bool = False
    fetch: bool = False
    cpu_plan: bool = False
    two_stage: bool = False
    memory_slots: bool = False
    dispatch: Literal["all2all", "allgather"] = "all2all"
    kernels: tuple[tuple[str, str], ...] = (("bf16", "triton_fused_moe"), ("fp8", "deepgemm_fp8"))

    def kernel(self, dtype: str) -> str:
        """The grouped-GEMM kernel for ``dtype`` (bad input when the system ships none)."""
        for have, name in self.kernels:
            if have == dtype:
                return name
        raise InputError("model.dtype", dtype, " | ".join(d for d, _ in self.kernels))


@dataclass(frozen=True)
class PlanInputs:
    """Everything a system may plan one layer from, beyond the routing and the setup:
    the predicted routing (systems with a predictor), the layer's static layout
    (``replication="static"``: physical slot -> expert) and the CPU timer (or None)."""

    predicted: np.ndarray | None
    layout: np.ndarray | None
    timer: Timer | None


#: ``plan(routed[T, k], origin[T], setup, inputs) -> MoeLayerPlan`` of one layer.
PlanFn = Callable[[np.ndarray, np.ndarray, MoeSetup, PlanInputs], MoeLayerPlan]


@dataclass(frozen=True)
class MoeSystem:
    """One MoE system: its ``balancer.policy`` name, label in words, capabilities and plan."""

    name: str
    label: str
    capabilities: MoeCapabilities
    plan: PlanFn


def load_systems(registry: Registry[MoeSystem]) -> None:
    """The shipped systems (:data:`BUILTIN` order), then the entry points."""
    for name in BUILTIN:
        registry.register(import_module(f"libra_des.plan.moe.catalog.{name}").SYSTEM)
    for point in entry_points(group=ENTRY_POINT_GROUP):
        system = point.load()
        if not isinstance(system, MoeSystem):
            raise TypeError(f"{ENTRY_POINT_GROUP} entry point {point.name}: not a MoeSystem")
        registry.register(system)


#: The process's registry (the one mutable object of the package: systems are added at
#: import time of their modules, never during a run).
REGISTRY: Registry[MoeSystem] = Registry(
    "MoE system", "balancer.policy", load_systems, replace=True
)


def register(system: MoeSystem) -> MoeSystem:
    """Add (or replace) a system; returns it, so a module can write ``SYSTEM = register(...)``."""
    return REGISTRY.register(system)


def moe_system(name: str) -> MoeSystem:
    """The system named ``name``; bad input (``balancer.policy``) when none is registered."""
    return REGISTRY.get(name)


def moe_system_names() -> tuple[str, ...]:
    """Every registered system's name, shipped ones first in :data:`BUILTIN` order."""
    return REGISTRY.names()

