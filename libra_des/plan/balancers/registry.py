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
from typing import TYPE_CHECKING, Any, Literal

from libra_des.registry import Registry

if TYPE_CHECKING:
    import numpy as np

    from libra_des.config import TrainingBalancerSpec
    from libra_des.config import TrainingScenario as Scenario
    from libra_des.plan.types import AttentionPlan
    from libra_des.workload.packing import PackedBatch

#: Entry-point group third-party balancers register under.
GROUP = "libra_des.balancers"
#: The package whose import registers the shipped balancers.
BUILTIN = "libra_des.plan.balancers.shipped"

#: How many DP replicas share one pool: one each, ``balancer.pool_size`` of them, or all DP.
PoolRule = Literal["replica", "configured", "all"]
#: (scenario, one pool's sequences) -> the slot's attention plan.
AttentionPlanner = Callable[["Scenario", "list[np.ndarray]"], "AttentionPlan"]
#: (scenario, many pools' sequences) -> their attention plans.
PoolsPlanner = Callable[["Scenario", "list[list[np.ndarray]]"], "list[AttentionPlan]"]
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
    ``attention_many``: the same plans as ``attention`` for many pools in one call (faster
    where the planner shares work across pools; None: one ``attention`` call per pool).
    ``scheduler_ops``: (tiles of a step, attention servers of a pool) -> CPU operations its
    scheduler runs to plan one step (None: no scheduler beyond the packing), each taking
    ``scheduler_op_seconds``; the simulator charges the part
    of that CPU time a step cannot hide (see ``sim/training/simulator.scheduler_seconds``).
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
    attention_many: PoolsPlanner | None = field(default=None, compare=False)
    config: type[TrainingBalancerSpec] | None = field(default=None, compare=False)
    scheduler_ops: Callable[[int, int], float] | None = field(default=None, compare=False)
    scheduler_op_seconds: float = 0.0
    #: Bad input its planner would refuse mid-run, checked when the scenario is elaborated
    #: (before any work): raises :class:`~libra_des.errors.InputError` (None: nothing to check).
    check: Callable[[Any], None] | None = field(default=None, compare=False)

    def pool_size(self, bal: TrainingBalancerSpec, dp: int) -> int:
        """P: replicas per pool under this balancer's rule."""
        if self.pool == "configured":
            return bal.pool_size
        return dp if self.pool == "all" else 1


def load_balancers(registry: Registry[TrainingBalancer]) -> None:
    """The shipped balancers (their package's ``SHIPPED``), then the entry points."""
    for shipped in importlib.import_module(BUILTIN).SHIPPED:
        registry.register(shipped)
    for point in entry_points(group=GROUP):
        loaded = point.load()
        if isinstance(loaded, TrainingBalancer):
            registry.register(loaded)


def config_of(name: str) -> type[TrainingBalancerSpec] | None:
    """The config model balancer ``name`` declares (None: shared, or no such balancer)."""
    return next((b.config for b in REGISTRY.items() if b.name == name), None)


def tap_users() -> tuple[str, ...]:
    """Names of the balancers whose attention plan is TAP's."""
    return tuple(b.name for b in REGISTRY.items() if b.runs_tap)


#: The process's registry (a plug-in registry is the one piece of module state by design).
REGISTRY: Registry[TrainingBalancer] = Registry(
    "training balancer", "balancer.policy", load_balancers
)
register = REGISTRY.register
names = REGISTRY.names
get = REGISTRY.get
