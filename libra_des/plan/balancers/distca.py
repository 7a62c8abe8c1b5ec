"""DistCA: TAP's tiles and placement over one pool of all DP replicas, always pipelined.

As it runs, DistCA also pays
- its server pool's imbalance: the pool's attention op lasts as long as its slowest server
  (the simulator's lockstep maximum over the pool's workers, as for every pool);
- its dispatch and return, priced by the all-to-all(v) model over the plan's per-pair bytes
  (``sim/training/opcost.slot_attention``);
- its scheduler's CPU time: a greedy pass that, for every tile, scans the pool's servers for
  the least-loaded one with room, ``tiles x servers`` operations per step, at
  :data:`OP_SECONDS` each. The scheduler plans step k+1 on the host while step k runs (its
  documents are known once the data loader delivers them), so only the part longer than a
  step shows (our assumption; the DistCA paper publishes no scheduler timing we use).
"""

from libra_des.plan.balancers.planners import tap, tap_many
from libra_des.plan.balancers.registry import TrainingBalancer

#: Host seconds per scheduler operation (one compare-and-update of a server's load in a
#: compiled loop): our assumption, a few nanoseconds of arithmetic plus a cache miss.
OP_SECONDS = 2e-8


def scheduler_ops(tiles: int, servers: int) -> float:
    """Operations of one step's greedy assignment: every tile scans every server once."""
    return float(tiles) * float(servers)


BALANCER = TrainingBalancer(
    name="distca", pool="all", attention=tap, always_pipelines=True, runs_tap=True,
    attention_many=tap_many, scheduler_ops=scheduler_ops, scheduler_op_seconds=OP_SECONDS,
)
