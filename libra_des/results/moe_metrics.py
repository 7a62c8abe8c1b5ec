"""The MoE prefill ``result.json``: what a run of :mod:`libra_des.sim.moe.simulator` measured
(its :class:`~libra_des.sim.moe.simulator.MoeRecord`), as the result's keys (docs/model.md B).

Training's result is :mod:`libra_des.results.metrics`'; the MoE kind adds ``scenario`` and
``wall_s`` (``kinds/moe.py``). Per stage of :data:`~libra_des.sim.moe.simulator.STAGES`, the
layer's exposed and hidden seconds; the load imbalance per layer and over time; TTFT
percentiles per request (a request's TTFT is its batch's prefill time: batches are served
closed-loop); the cost provenance (``cost_sources``) and the host stages' report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Unpack

import numpy as np

from libra_des.config import MoeScenario as Scenario
from libra_des.hardware.collectives.tiers import tier_keys
from libra_des.plan.moe.registry import moe_system
from libra_des.sim.moe.batch import Wiring
from libra_des.sim.moe.block import NON_EXPERT
from libra_des.sim.moe.costs import StageCoster
from libra_des.sim.moe.cpu import cost_sources
from libra_des.sim.moe.host import eplb_rebalance, host_report
from libra_des.sim.moe.simulator import STAGES, MoeRecord, RunOptions, RunTotals, run_moe


def simulate_moe(
    scenario: Scenario, rng: np.random.Generator, **options: Unpack[RunOptions]
) -> dict[str, Any]:
    """Simulate MoE prefill for ``scenario`` (:func:`~libra_des.sim.moe.simulator.run_moe`,
    whose options these are); returns the result dict."""
    return moe_result(run_moe(scenario, rng, **options))


def moe_result(record: MoeRecord) -> dict[str, Any]:
    """The result dict of one measured run (``kinds/moe.py`` adds ``wall_s`` and
    ``scenario``)."""
    scenario, wiring, coster, cost = record.scenario, record.wiring, record.coster, record.cost
    result = assemble(scenario, wiring, record.totals, record.events)
    result["cost_sources"] = cost_sources(cost, record.gpus, record.gpus_per_node,
                                          wiring.allgather, wiring.fetch,
                                          scenario.balancer.cpu_time == "measured",
                                          coster.dtype, wiring.cpu_predict)
    result["host_stages"] = host_stages(scenario, wiring, coster, result)
    result["grouped_kernel"] = coster.kernel.name if coster.kernel is not None else None
    result["grouped_fit"] = coster.fit_report()
    if record.interference is not None:
        slowed, kernel, comm = record.interference
        # Per GPU over the run. Dispatch and combine keep their network-model times: their
        # HBM slowdown (``collective_factor``) is 1 while kernel and transfer HBM demand fit
        # the bandwidth, as at NVLink port rates on the shipped GPUs
        # (hardware/compute/interference.py).
        result["interference"] = {"compute_slowdown_s": slowed / record.gpus,
                                  "collective_slowdown_s": 0.0, "kernel_factor": kernel,
                                  "collective_factor": comm}
    return {**result, **tier_keys(cost.tiers(), cost.choices(), record.layout)}


def host_stages(scenario: Scenario, wiring: Wiring, coster: StageCoster,
                result: dict[str, Any]) -> dict[str, object]:
    """The host stages' report (``sim.moe.host.host_report``) of this run."""
    m = scenario.model
    # Every kernel of a layer: the block's, two grouped GEMMs per expert stage, dispatch,
    # combine, and the lookahead's gate when the system predicts on the GPU.
    kernels = len(NON_EXPERT) + (4 if wiring.two_stage else 2) + 2 + int(wiring.gpu_predict)
    # Static replicas laid out from a profiling sample are EPLB's rebalancing: a system
    # registered with them pays its host step once per rebalancing period.
    static = moe_system(scenario.balancer.policy).capabilities.replication == "static"
    eplb = eplb_rebalance(m.layers - m.dense_layers, m.experts,
                          scenario.balancer.redundant_experts, coster.gpus) if static else None
    return host_report(coster.prices, result["layer_breakdown_s"], result["moe_layer_s"],
                       kernels, wiring.cpu_predict, eplb)


def percentiles(batch_s: Sequence[float], requests: Sequence[int]) -> dict[str, float]:
    per_request = np.repeat(np.asarray(batch_s), np.asarray(requests))
    return {
        "mean": float(per_request.mean()),
        "p50": float(np.percentile(per_request, 50)),
        "p99": float(np.percentile(per_request, 99)),
    }


def assemble(scenario: Scenario, wiring: Wiring, t: RunTotals, events: int) -> dict[str, Any]:
    """The MoE result dict (``run`` adds ``wall_s`` and ``scenario``)."""
    layers = max(len(t.layer_s), 1)
    breakdown = {
        name: {
            "exposed": t.exposed.get(name, 0.0) / layers,
            "hidden": max(t.span.get(name, 0.0) - t.exposed.get(name, 0.0), 0.0) / layers,
        }
        for name in STAGES
    }
    imb = np.asarray(t.load_ratio, dtype=np.float64)
    layer_s = float(np.mean(t.layer_s)) if t.layer_s else 0.0
    outside = sum(breakdown[name]["exposed"] for name in NON_EXPERT)
    total_s = float(np.sum(t.batch_s))
    result: dict[str, Any] = {
        "kind": "moe_inference",
        "policy": scenario.balancer.policy,
        "dispatch": "allgather" if wiring.allgather else "all2all",
        # Named only when not NCCL's all-to-all (results of the shipped scenarios unchanged).
        **({"dispatch_kernel": wiring.dispatch_kernel} if wiring.dispatch_kernel != "nccl"
           else {}),
        "predictor": wiring.predictor_label,
        "moe_layer_s": layer_s,
        #: Share of the layer's critical path spent in kernels outside the routed experts.
        "non_expert_share": min(outside / layer_s, 1.0) if layer_s > 0 else 0.0,
        "dense_layers_s": t.dense_s,
        "layer_breakdown_s": breakdown,
        "imbalance_ratio": {
            "mean": float(imb.mean()),
            "max": float(imb.max()),
            "per_layer": imb.mean(axis=0).tolist(),
            "over_time": imb.mean(axis=1).tolist(),
        },
        "prefill_tokens_per_s": t.tokens / total_s if total_s > 0 else 0.0,
        "prefill_s": total_s,
        "ttft_s": percentiles(t.batch_s, t.requests),
        "replica_waste_fraction": t.wasted / t.replicas if t.replicas else 0.0,
        "replicas": t.replicas,
        "replica_pairs_fraction": t.replica_pairs / t.pairs if t.pairs else 0.0,
        "predictor_accuracy": float(np.mean(t.accuracy)) if t.accuracy else None,
        "sharding_iterations_mean": float(np.mean(t.iterations)) if t.iterations else 0.0,
        "bytes_moved": {**t.bytes, "total": float(sum(t.bytes.values()))},
        "tokens": t.tokens,
        "events": events,
        "cpu_time": scenario.balancer.cpu_time,
    }
    if scenario.balancer.cpu_time == "measured" and wiring.cpu_plan:
        result["cpu_sharding_wall_s"] = t.cpu_wall
    return result
