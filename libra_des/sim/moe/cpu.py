"""CPU stages of the MoE systems and where every stage's cost comes from.

Each CPU stage is priced as its algorithm's operation count times a cost per operation, run
single-threaded on a stated server CPU (:data:`SERVER_CPU`):

* ``sharding_cpu`` (Libra's remote-token sharding, HarMoEny's greedy token moves): the loads
  of the ``[G, E]`` pair counts (``G E`` operations), then per greedy move a scan of the GPUs
  for the most loaded, of its experts for the largest share, and of the GPUs for the
  least-loaded holder (``2 G + E``): :func:`sharding_ops`.
* ``replication_cpu`` (Libra's locality-aware replication, Lina's replica choice): one pass
  over the predicted ``[G, E]`` counts, then per replica placed the same three scans:
  :func:`replication_ops`. It plans the next layer's replicas and runs beside the current one.
* Lina's path-table lookup (``prediction`` on the CPU): its replica choice needs only the
  predicted load of every expert, which the table gives from the previous layer's expert
  histogram: one pass over the tokens' ``k`` previous-layer experts (``T k``), then the
  histogram times the layer's ``E x E`` table (``E^2`` reads of 64 KB at E = 128: it stays in
  the core's L2, so it is priced like the other loops): :func:`lookup_ops`.
* Routing rows to the host and the load matrix back (``metadata``): PCIe Gen5 x16 datasheet
  rate at an assumed 80% efficiency plus an assumed 10 us per transfer (``sim.moe.costs``).

The cost per operation, :data:`CYCLES_PER_OP`, is measured with compiled (numba)
implementations of these loops (``benchmarks/moe_cpu_ops.py``, one core), in cycles of the
measuring host's clock, and converted to seconds at the server CPU's base clock: provenance
``own_implementation`` with the CPU model named. No paper we searched (the Libra MoE paper,
HarMoEny arXiv 2506.12417, Lina) publishes a per-layer time for these stages with its
hardware, so there is no ``borrowed`` calibration point to set beside the prediction
(:data:`PUBLISHED_STAGE_TIMES` stays empty until one is found; it is never used as output).

``balancer.cpu_time: measured`` replaces the sharding cost by the wall clock of this project's
own implementation in this run (named ``own_implementation`` in ``cost_sources``).
"""

from __future__ import annotations

from dataclasses import dataclass

from libra_des.hardware.costs import CostModel

#: Cycles per counted operation of the compiled planning loops: the median over sharding,
#: replication and lookup at G = 8, 16, 32 and E = 128 of ``benchmarks/moe_cpu_ops.py``
#: (numba, one core of an AMD EPYC host at 2.6 GHz; per-loop values in benchmarks/README.md).
CYCLES_PER_OP = 1.62
#: The host CPU the stages are priced on, and its clock (datasheet base frequency).
SERVER_CPU = "Intel Xeon Platinum 8480C (the DGX H100/H200 host CPU), one core"
SERVER_GHZ = 2.0
#: Seconds per operation on :data:`SERVER_CPU`.
SECONDS_PER_OP = CYCLES_PER_OP / (SERVER_GHZ * 1e9)
#: Published per-layer stage times (stage, system, seconds, hardware, source): none found.
PUBLISHED_STAGE_TIMES: tuple[tuple[str, str, float, str, str], ...] = ()


@dataclass(frozen=True)
class CpuSource:
    """Where a CPU stage's default cost comes from."""

    provenance: str  # measured | borrowed | assumed | own_implementation
    source: str


PRICED = f"operation count x {CYCLES_PER_OP} cycles per operation (numba) on {SERVER_CPU}"
CPU_SOURCES = {
    "sharding_cpu": CpuSource("own_implementation", PRICED),
    "replication_cpu": CpuSource("own_implementation", PRICED),
    "prediction_cpu": CpuSource("own_implementation", PRICED),
    "metadata": CpuSource("assumed", "PCIe Gen5 x16 datasheet rate at 80% + 10 us per transfer"),
}


def sharding_ops(gpus: int, experts: int, moves: int) -> float:
    """Operations of the greedy sharding (or HarMoEny's moves) over ``[G, E]`` counts."""
    return float(gpus * experts + moves * (2 * gpus + experts))


def replication_ops(gpus: int, experts: int, replicas: int) -> float:
    """Operations of planning ``replicas`` replicas over the predicted ``[G, E]`` counts."""
    return float(gpus * experts + replicas * (2 * gpus + experts))


def lookup_ops(tokens: int, experts: int, top_k: int) -> float:
    """Operations of Lina's path-table lookup of one layer's expert loads."""
    return float(tokens * top_k + experts * experts)


def sharding_seconds(iterations: int, gpus: int = 8, experts: int = 128) -> float:
    """Modelled CPU sharding time for ``iterations`` greedy moves."""
    return SECONDS_PER_OP * sharding_ops(gpus, experts, iterations)


def replication_seconds(replicas: int, gpus: int, experts: int) -> float:
    """Modelled replica planning of ``replicas`` replicas."""
    return SECONDS_PER_OP * replication_ops(gpus, experts, replicas)


def lookup_seconds(tokens: int, experts: int, top_k: int) -> float:
    """Modelled path-table lookup of one layer's ``tokens`` tokens."""
    return SECONDS_PER_OP * lookup_ops(tokens, experts, top_k)


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
