"""The training-balancer registry: each balancer declares what it is; nothing branches on names.

A balancer is one module that builds a :class:`TrainingBalancer` and calls :func:`register`.
The config (which policy names are valid, whether ``pool_size`` must divide DP), the step
planner (pool size, grouping, window packing, Pipeliner chunks, attention plan) and the
simulator (padded or real-token linear work) read the declared properties.

Discovery is lazy, on the first look-up or registration: the shipped balancers (the
``SHIPPED`` tuple of ``libra_des.plan.balancers``, imported by name so this low layer holds no
static import of the planners), then every entry point of the group ``libra_des.balancers``:
loading one imports its module, which registers itself (or the entry point names a
TrainingBalancer, registered here).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Literal

from libra_des.errors import InputError

if TYPE_CHECKING:
    import numpy as np

    from libra_des.config import TrainingBalancerSpec
    from libra_des.config import TrainingScenario as Scenario
    from libra_des.plan.types import AttentionPlan
    from libra_des.workload.packing import PackedBatch

#: Entry-point group third-party balancers register under.
GROUP = "libra_des.balancers"
#: The package whose import registers the shipped balancers.
BUILTIN = "libra_des.plan.balancers"

#: How many DP replicas share one pool: one each, ``balancer.pool_size`` of them, or all DP.
PoolRule = Literal["replica", "configured", "all"]
#: (scenario, one pool's sequences, compiled TAP kernel or not) -> the slot's attention plan.
AttentionPlanner = Callable[["Scenario", "list[np.ndarray]", "bool | None"], "AttentionPlan"]
#: (scenario, the stream's window, deferred samples) -> (window, changed samples, deferred).
WindowPacker = Callable[
    ["Scenario", "PackedBatch", "np.ndarray"], "tuple[PackedBatch, bool, np.ndarray]"
]


@dataclass(frozen=True)
class TrainingBalancer:
    """What a training balancer is, as the planner and simulator need to know it.

    ``vrsp``: pools are grouped by VRSP when ``balancer.vrsp`` is on (else arrival order).
    ``always_pipelines``: the Pipeliner's chunks apply even with ``balancer.pipeliner`` off.
    ``runs_tap``: its attention plan is TAP's (so ``auto`` H and B are searched for it).
    ``real_token_linear``: linear layers run on the slot's real tokens, not the padded length.
    ``packer``: repacks the stream's window its own way (None: the window as drawn).
    ``config``: the model of its ``balancer:`` section, a subclass of
    :class:`~libra_des.config.TrainingBalancerSpec` adding the knobs it reads (None: the
    shared model, which every shipped balancer uses; see that class for why).
    """

    name: str
    pool: PoolRule
    attention: AttentionPlanner
    vrsp: bool = False
    always_pipelines: bool = False
    runs_tap: bool = False
    real_token_linear: bool = False
    packer: WindowPacker | None = field(default=None, compare=False)
    config: type[TrainingBalancerSpec] | None = field(default=None, compare=False)

    def pool_size(self, bal: TrainingBalancerSpec, dp: int) -> int:
        """P: replicas per pool under this balancer's rule."""
        if self.pool == "configured":
            return bal.pool_size
        return dp if self.pool == "all" else 1


class Registry:
    """Balancers by name, in registration order (shipped first, then entry points)."""

    def __init__(self) -> None:
        self._by_name: dict[str, TrainingBalancer] = {}
        self._loaded = False

    def register(self, balancer: TrainingBalancer) -> TrainingBalancer:
        self._load()  # the shipped balancers keep their places ahead of any newcomer
        known = self._by_name.get(balancer.name)
        if known is not None and known is not balancer:
            raise ValueError(f"training balancer {balancer.name!r} is registered twice")
        self._by_name[balancer.name] = balancer
        return balancer

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        for shipped in importlib.import_module(BUILTIN).SHIPPED:
            self.register(shipped)
        for point in entry_points(group=GROUP):
            loaded = point.load()
            if isinstance(loaded, TrainingBalancer):
                self.register(loaded)

    def names(self) -> tuple[str, ...]:
        self._load()
        return tuple(self._by_name)

    def config_of(self, name: str) -> type[TrainingBalancerSpec] | None:
        """The config model balancer ``name`` declares (None: shared, or no such balancer)."""
        self._load()
        known = self._by_name.get(name)
        return known.config if known is not None else None

    def tap_users(self) -> tuple[str, ...]:
        """Names of the balancers whose attention plan is TAP's."""
        return tuple(n for n in self.names() if self._by_name[n].runs_tap)

    def get(self, name: str) -> TrainingBalancer:
        """The balancer called ``name``; an unknown name is bad input."""
        self._load()
        if name not in self._by_name:
            raise InputError("balancer.policy", name, " | ".join(self._by_name))
        return self._by_name[name]


#: The process's registry (a plug-in registry is the one piece of module state by design).
REGISTRY = Registry()
register = REGISTRY.register
names = REGISTRY.names
get = REGISTRY.get
tap_users = REGISTRY.tap_users
config_of = REGISTRY.config_of
