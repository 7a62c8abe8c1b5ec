"""Where every MoE stage's cost comes from (``cost_sources``).

The host (CPU) stages (``sharding_cpu``, ``replication_cpu``, Lina's CPU ``prediction``,
``metadata``) are priced in ``sim.moe.host`` as their serving stacks run them: Python loop
iterations, torch ops with their per-call overhead, device-host copies and the launches after
a synchronisation. Their per-call costs are ``measured`` when the run's profile carries a
``host`` block (``libra-des calibrate`` on the user's CPU), else ``borrowed`` (measured the
same way on the development host, named in ``sim.moe.host``); a copy's latency is
``assumed`` unless a GPU calibration measured it. ``balancer.cpu_time: measured`` replaces
the sharding's compute by the wall clock of this project's own planner in this run
(``own_implementation``).
"""

from __future__ import annotations

from libra_des.hardware.costs import CostModel


def host_provenance(cost: CostModel, stage: str) -> str:
    """``measured`` with a calibrated host block (``copy_s`` for the metadata), else the
    defaults' tier: per-call costs ``borrowed`` from the development host, copies ``assumed``."""
    host = cost.profile.host
    if stage == "metadata":
        return "measured" if host is not None and host.copy_s is not None else "assumed"
    return "measured" if host is not None else "borrowed"


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
    dtype: str = "bf16", cpu_predict: bool = False,
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
        "prediction": host_provenance(cost, "prediction") if cpu_predict else gemm,
        "replica_copy": copy,
        "dispatch": collective_provenance(fits, send, gpus, per_node),
        "moe_local": cost.grouped_provenance(dtype),
        "sharding_cpu": "own_implementation" if measured_cpu else
        host_provenance(cost, "sharding_cpu"),
        "metadata": host_provenance(cost, "metadata"),
        "moe_remote": cost.grouped_provenance(dtype),
        "combine": collective_provenance(fits, take, gpus, per_node),
        "replication_cpu": host_provenance(cost, "replication_cpu"),
    }
