"""Elaboration of an MoE prefill scenario: EP group, memory check, routing source, predictor.

Memory model (assumption, per GPU): resident weights are the attention and dense layers (full
copies under DP attention, ``1/tp`` under TP attention), embeddings and LM head, shared
experts, and ``1/G`` of the routed experts; extra expert slots cost ``2 * slots`` expert
buffers for dynamic replication (Libra, Lina: double-buffered across even/odd layers; HarMoEny:
its fetch buffer) and ``redundant_experts / G`` per MoE layer for EPLB's static replicas; the
KV cache of the GPU's tokens and ``ACTIVATION_COPIES`` hidden-state buffers of the whole batch
(dispatch may gather all tokens) come on top. It must fit in ``USABLE_HBM`` of the device.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from libra_des.config import ModelSpec
from libra_des.config import MoeScenario as Scenario
from libra_des.errors import InputError
from libra_des.hardware.collectives.deepep import KERNELS, check_fabric, check_width
from libra_des.hardware.compute.grouped_kernels import GroupedKernel, grouped_kernel
from libra_des.hardware.compute.memory import device_hbm
from libra_des.hardware.fabric.topology import Topology
from libra_des.plan.moe.registry import moe_system

#: Share of HBM a serving engine can use (assumption: CUDA context, allocator slack).
USABLE_HBM = 0.9
ACTIVATION_COPIES = 4


@dataclass(frozen=True)
class EpGroup:
    """The expert-parallel group (the first ``gpus`` GPUs of the topology)."""

    gpus: int
    gpus_per_node: int


def ep_group(scenario: Scenario, topo: Topology) -> EpGroup:
    """Validate the EP size against the topology and the model's experts, and a DeepEP
    dispatch kernel against the nodes."""
    moe_system(scenario.balancer.policy)  # bad input first: an unregistered system
    check_ep_width(scenario)
    ep, experts = scenario.parallelism.ep, scenario.model.experts
    if ep > topo.num_gpus:
        raise InputError("parallelism.ep", ep, f"<= {topo.num_gpus} GPUs of the topology")
    if experts % ep:
        raise InputError("parallelism.ep", ep, f"a divisor of model.experts={experts}")
    tp = scenario.parallelism.tp
    if tp not in (1, ep):
        raise InputError("parallelism.tp", tp, f"1 (DP attention) or ep={ep} (TP attention)")
    if static_replicas(scenario.balancer.policy) and scenario.balancer.redundant_experts % ep:
        raise InputError(
            "balancer.redundant_experts", scenario.balancer.redundant_experts,
            f"a multiple of ep={ep}",
        )
    group = EpGroup(ep, min(topo.gpus_per_node, ep))
    kernel = scenario.balancer.dispatch_kernel
    if kernel in KERNELS:
        check_fabric(KERNELS[kernel], topo.fabric().intra_kind, group.gpus_per_node)
    return group


def check_ep_width(scenario: Scenario) -> None:
    """Bad input when the EP group is wider than the routed experts (a GPU would hold none)."""
    check_width(scenario.parallelism.ep, scenario.model.experts)


def system_kernel(policy: str, dtype: str) -> GroupedKernel:
    """The grouped-GEMM kernel the system ``policy`` ships for ``dtype`` (``model.dtype``)."""
    name = moe_system(policy).capabilities.kernel(dtype)
    return grouped_kernel(name, dtype)


def static_replicas(policy: str) -> bool:
    """Whether the system ``policy`` lays out ``balancer.redundant_experts`` static replicas
    per layer."""
    return moe_system(policy).capabilities.replication == "static"


def expert_bytes(model: ModelSpec) -> float:
    """Weights of one routed expert: gate, up and down projections (one byte a weight when
    the experts run in FP8, ``model.dtype``)."""
    per = 1 if getattr(model, "dtype", "bf16") == "fp8" else model.dtype_bytes
    return 3.0 * model.hidden * (model.expert_ffn or model.hidden) * per


def resident_bytes(scenario: Scenario, gpus: int) -> float:
    """Per-GPU bytes of everything except extra expert slots."""
    m, w = scenario.model, scenario.workload
    moe_layers = m.layers - m.dense_layers
    attn = m.hidden * (m.heads_q + 2 * m.heads_kv) * m.head_dim + m.heads_q * m.head_dim * m.hidden
    attn_share = 1.0 / scenario.parallelism.tp
    dense = 3.0 * m.hidden * (m.ffn or 0) * m.dense_layers
    params = attn * m.layers * attn_share + dense + 2.0 * m.vocab * m.hidden
    params += m.layers * m.hidden * m.experts  # gates
    weights = params * m.dtype_bytes + expert_bytes(m) * (
        moe_layers * (m.experts / gpus + m.shared_experts)
    )
    tokens = w.batch * w.seq_len
    kv = tokens / gpus * m.layers * 2 * m.heads_kv * m.head_dim * m.dtype_bytes
    act = ACTIVATION_COPIES * tokens * m.hidden * m.dtype_bytes
    return float(weights + kv + act)


def slot_bytes(scenario: Scenario, gpus: int) -> float:
    m, bal = scenario.model, scenario.balancer
    if static_replicas(scenario.balancer.policy):
        return expert_bytes(m) * (m.layers - m.dense_layers) * bal.redundant_experts / gpus
    if moe_system(bal.policy).capabilities.memory_slots:
        return expert_bytes(m) * 2 * bal.slots
    return 0.0


def check_memory(scenario: Scenario, gpus: int, gpu_name: str) -> None:
    """Bad input when weights, slots, KV cache and activations exceed the device memory."""
    hbm = device_hbm(gpu_name) * USABLE_HBM
    base, extra = resident_bytes(scenario, gpus), slot_bytes(scenario, gpus)
    if base + extra <= hbm:
        return
    static = static_replicas(scenario.balancer.policy)
    field = "balancer.redundant_experts" if static else "balancer.slots"
    value = scenario.balancer.redundant_experts if static else scenario.balancer.slots
    per_slot = expert_bytes(scenario.model) / 1e6
    raise InputError(
        field, value,
        f"a count whose expert slots ({per_slot:.1f} MB each) fit beside "
        f"{base / 1e9:.1f} GB resident in {hbm / 1e9:.1f} GB usable HBM of {gpu_name}",
    )


def batch_lengths(seq_len: int, batch: int) -> np.ndarray:
    """Request lengths of one batch (all ``seq_len``: the paper's fixed-length setting)."""
    return np.full(batch, seq_len, dtype=np.int64)
