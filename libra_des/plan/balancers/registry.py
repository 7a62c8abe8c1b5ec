"""The training-balancer registry: each balancer declares what it is; nothing branches on names.

A balancer is one module that builds a
:class:`~libra_des.plan.balancers.balancer.TrainingBalancer` (``balancer.py``, below this
registry) and is listed in ``shipped.py`` (or calls :func:`register`, as a plug-in does). The
config (which policy names are valid, whether ``pool_size`` must divide DP), the step
planner (pool size, grouping, window packing, Pipeliner chunks, attention plan) and the
simulator (padded or real-token linear work) read the declared properties.

Discovery is lazy, on the first look-up or registration: the shipped balancers (the
``SHIPPED`` tuple of ``libra_des.plan.balancers.shipped``, named by :data:`BUILTIN`: the
balancers and the planners they use import ``balancer.py``, never this registry, so the
name closes no import circle), then every entry point of the group ``libra_des.balancers``:
loading one imports its module, which registers itself (or the entry point names a
TrainingBalancer, registered here).
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from libra_des.plan.balancers.balancer import AttentionPlanner as AttentionPlanner
from libra_des.plan.balancers.balancer import PoolRule as PoolRule
from libra_des.plan.balancers.balancer import PoolsPlanner as PoolsPlanner
from libra_des.plan.balancers.balancer import TrainingBalancer as TrainingBalancer
from libra_des.plan.balancers.balancer import WindowPacker as WindowPacker
from libra_des.registry import Registry

if TYPE_CHECKING:
    from libra_des.config import TrainingBalancerSpec

#: Entry-point group third-party balancers register under.
GROUP = "libra_des.balancers"
#: The module whose ``SHIPPED`` lists the shipped balancers (named, not imported).
BUILTIN = "libra_des.plan.balancers.shipped"

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
