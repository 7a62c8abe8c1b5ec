"""CPU stages of the MoE systems and where every stage's cost comes from.

The simulated systems run their planning on the host CPU. No paper reports per-layer CPU
times (the Libra MoE paper, Lina and HarMoEny give none we could find), so each default below
is a measurement of an equivalent implementation, named as such, or a stated assumption:

* ``sharding_cpu`` (Libra's remote-token sharding, HarMoEny's greedy token moves): this
  project's numpy greedy engine (``plan/moe/sharding.py``), the same algorithm the papers
  describe, timed on the project's 2-core CI host: 30 us + 13.4 us per greedy move (least
  squares over 96 layers). Source: measurement of an equivalent implementation.
* ``replication_cpu`` (Libra's locality-aware replication, Lina's replica choice): this
  project's numpy planners (``plan/moe/replication.py``, ``plan/moe/lina.py``) timed on the
  same host (median of 20 Zipf-skewed draws, G = 8/16/32, E = 128, N = 8, alpha = 0.5:
  0.95 / 4.9 / 12.7 ms for Libra, 1.5 / 10 / 23 ms for Lina): about 15 ns per replica placed
  per ``[G, E]`` cell (12-22 ns over those cases). Source: measurement of an equivalent
  implementation. It plans the next layer's replicas and runs beside the current layer.
* Lina's path-table lookup: 20 ns per token (our assumption: a few table reads per token).
* Routing rows to the host and the load matrix back (``metadata``): PCIe Gen5 x16 datasheet
  rate at an assumed 80% efficiency plus an assumed 10 us per transfer (``moe_costs``).

``balancer.cpu_time: measured`` replaces the sharding cost by the wall clock of this project's
own implementation in this run (named ``own_implementation`` in ``cost_sources``).
"""

from __future__ import annotations

from dataclasses import dataclass

from libra_des.hardware.costs import CostModel

#: Sharding: fixed + per greedy move (own numpy engine on the 2-core CI host; see above).
CPU_BASE_S = 30e-6
CPU_PER_ITERATION_S = 13e-6
#: Replica planning: seconds per replica placed per [G, E] cell (own numpy planners, same host).
REPLICATION_PER_STEP_CELL_S = 15e-9
#: Lina's path-table lookup on the CPU, per token (assumption).
LINA_LOOKUP_PER_TOKEN_S = 20e-9


@dataclass(frozen=True)
class CpuSource:
    """Where a CPU stage's default cost comes from."""

    provenance: str  # measured | borrowed | assumed | own_implementation
    source: str


CPU_SOURCES = {
    "sharding_cpu": CpuSource(
        "borrowed", "equivalent implementation (plan/moe/sharding.py) timed on the CI host"),
    "replication_cpu": CpuSource(
        "borrowed", "equivalent implementation (plan/moe/replication.py, lina.py) timed on the "
        "CI host"),
    "prediction_cpu": CpuSource("assumed", "Lina path-table lookup, 20 ns per token"),
    "metadata": CpuSource("assumed", "PCIe Gen5 x16 datasheet rate at 80% + 10 us per transfer"),
}


def sharding_seconds(iterations: int) -> float:
    """Modelled CPU sharding time for ``iterations`` greedy moves."""
    return CPU_BASE_S + CPU_PER_ITERATION_S * iterations


def replication_seconds(replicas: int, gpus: int, experts: int) -> float:
    """Modelled replica planning: one placement step per replica over the ``[G, E]`` loads."""
    return REPLICATION_PER_STEP_CELL_S * replicas * gpus * experts


def collective_provenance(
    fits: list[tuple[str, int, int]], op: str, gpus: int, per_node: int
) -> str:
    """``measured`` for a fit of this op, group and layout; ``borrowed`` for a fit of the op at
    another size (the curve is reused); else ``assumed`` (alpha-beta on datasheet links)."""
    if (op, gpus, per_node) in fits:
        return "measured"
    return "borrowed" if any(f[0] == op for f in fits) else "assumed"


def cost_sources(
    cost: CostModel, gpus: int, per_node: int, allgather: bool, fetch: bool, measured_cpu: bool,
    dtype: str = "bf16",
) -> dict[str, str]:
    """Per stage of ``sim.moe.simulator.STAGES``: measured, borrowed or assumed (see module doc).

    Kernels are ``measured`` when the profile holds a fit for them (fitted on measurements of
    that device), ``borrowed`` when fitted on another device's public measurements, and
    ``assumed`` when priced from datasheet numbers and kernel constants alone.
    """
    prof = cost.profile
    fits = [(f.op, f.group, min(f.gpus_per_node or f.group, f.group)) for f in prof.fits]
    ops = {f.op for f in prof.fits}
    gemm = "measured" if "gemm" in ops else "assumed"
    send, take = ("all_gather", "reduce_scatter") if allgather else ("all_to_all", "all_to_all")
    copy = "assumed" if fetch else ("measured" if "send_recv" in ops else "assumed")
    elementwise = "assumed"  # HBM datasheet rate at the profile's stated efficiency
    return {
        "residual_norm_attn": elementwise,
        "qkv_proj": gemm,
        "rope": elementwise,
        "attention": "measured" if "attention" in ops else "assumed",
        "o_proj": gemm,
        "residual_norm_moe": elementwise,
        "gate": gemm,
        "gate_topk": elementwise,
        "permute": elementwise,
        "shared_experts": gemm,
        "unpermute": elementwise,
        "prediction": gemm,
        "replica_copy": copy,
        "dispatch": collective_provenance(fits, send, gpus, per_node),
        "moe_local": cost.grouped_provenance(dtype),
        "sharding_cpu": "own_implementation" if measured_cpu else
        CPU_SOURCES["sharding_cpu"].provenance,
        "metadata": CPU_SOURCES["metadata"].provenance,
        "moe_remote": cost.grouped_provenance(dtype),
        "combine": collective_provenance(fits, take, gpus, per_node),
        "replication_cpu": CPU_SOURCES["replication_cpu"].provenance,
    }
