"""DistCA as its planner runs (``distca``) and the former tile model (``distca_tiles``).

``distca``: core-attention tasks start on the GPUs that hold their tokens and DistCA's
scheduler moves work from GPUs above the mean to those below it, every GPU of the pool (all
DP replicas) an attention server; ping-pong overlaps the exchange (``libra_des.plan.distca``,
docs/model.md A).

``distca_tiles``: TAP's tiles, placement and Pipeliner over one pool of all DP replicas,
always pipelined (the model before DistCA's planner was read; kept for comparison).

Both pay
- the pool's imbalance: the pool's attention op lasts as long as its slowest server
  (the simulator's lockstep maximum over the pool's workers, as for every pool);
- their dispatch and return, priced by the all-to-all(v) model over the plan's per-pair
  bytes (``sim/training/opcost.slot_attention``);
- the scheduler's CPU time: ``tasks x servers`` operations per step (``distca``: each of its
  moves scans the tasks on the donors, and a step makes about one move per server;
  ``distca_tiles``: every tile scans every server once), at :data:`OP_SECONDS` each. The
  scheduler plans step k+1 on the host while step k runs (its documents are known once the
  data loader delivers them), so only the part longer than a step shows (our assumption; the
  DistCA paper publishes no scheduler timing we use).
"""

from __future__ import annotations

from functools import partial

import numpy as np

from libra_des.config import TrainingScenario as Scenario
from libra_des.plan.balancers.balancer import TrainingBalancer
from libra_des.plan.balancers.planners import tap, tap_many
from libra_des.plan.distca import distca_attention_plan
from libra_des.plan.types import AttentionPlan

#: Host seconds per scheduler operation (one compare-and-update of a server's load in a
#: compiled loop): our assumption, a few nanoseconds of arithmetic plus a cache miss.
OP_SECONDS = 2e-8


def scheduler_ops(tasks: int, servers: int) -> float:
    """Operations of one step's assignment: every task (tile) against every server once."""
    return float(tasks) * float(servers)


def servers_plan(scenario: Scenario, seqs: list[np.ndarray]) -> AttentionPlan:
    """DistCA's scheduler over the pool's replicas' GPUs."""
    return distca_attention_plan(seqs, cp=scenario.parallelism.cp, model=scenario.model,
                                 packed_length=scenario.workload.packed_length)


BALANCER = TrainingBalancer(
    name="distca", pool="all", attention=servers_plan, real_token_linear=False,
    scheduler_ops=scheduler_ops, scheduler_op_seconds=OP_SECONDS,
)

#: DistCA on TAP's tiles always runs the Pipeliner's chunks: the flag the balancer declares
#: and the one its planners are bound to.
PIPELINES = True

TILES = TrainingBalancer(
    name="distca_tiles", pool="all", attention=partial(tap, always_pipelines=PIPELINES),
    always_pipelines=PIPELINES, runs_tap=True,
    attention_many=partial(tap_many, always_pipelines=PIPELINES),
    scheduler_ops=scheduler_ops, scheduler_op_seconds=OP_SECONDS,
)
