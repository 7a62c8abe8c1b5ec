"""What a training balancer declares (:class:`TrainingBalancer`), below the balancer registry
(``registry.py``) and the balancers' modules: a balancer's module builds its declaration from
here, so neither it nor the planners it uses import the registry that lists it (the registry
names ``shipped.py``, which imports the balancers)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import numpy as np

    from libra_des.config import TrainingBalancerSpec
    from libra_des.config import TrainingScenario as Scenario
    from libra_des.plan.types import AttentionPlan
    from libra_des.workload.packing import PackedBatch

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


def pipeliner_chunks_of(bal: TrainingBalancerSpec, always_pipelines: bool) -> int:
    """M: the Pipeliner's chunks of a ``balancer:`` section (1 when it is off, unless the
    balancer always pipelines, as DistCA does)."""
    return bal.chunks if (bal.pipeliner or always_pipelines) else 1
