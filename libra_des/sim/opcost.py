"""Vectorised durations of pipeline ops: everything inside a stage that needs no event.

Assumptions (the model's, stated once):

* A pipeline entity's workers move in lockstep: every layer's pre-attention part (norm, QKV
  projection), pooled attention, and post-attention part (output projection, FFN, norm) ends
  when its slowest worker ends. Per-worker noise is drawn per layer and folded in by ``max``.
* Linear parts are the same for every worker (packing gives each CP worker L/cp tokens); their
  backward costs 2x the forward (two GEMMs per forward GEMM).
* Pooled attention follows the Pipeliner with M chunks on a separate comm stream: the pool's
  dispatch of a chunk is an all-to-all(v) over the plan's per-pair bytes, so it takes as long
  as its slowest rank; each worker then runs the step-synchronous schedule of docs/model.md.
* The backward re-sends Q, K, V and dO along the same exchange plan (dispatch + return bytes)
  and returns dQ, dK, dV (dispatch bytes); attention backward FLOPs come from the cost model.
* MoE FFNs use expert parallelism over the replica's CP group with balanced routing; their
  all-to-all dispatch and combine are exposed communication.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from libra_des.config import Scenario
from libra_des.hardware.costs import CostModel
from libra_des.plan.step import StepPlan


@dataclass(frozen=True)
class LinearCosts:
    """Per-worker, per-layer seconds of the non-attention parts of one microbatch."""

    pre_fwd: float
    post_fwd: float
    ep_comm_fwd: float
    act_bytes: float
    grad_bytes: float  # replicated weights (attention, router, dense FFN): reduced over DP x CP
    expert_grad_bytes: float = 0.0  # this worker's experts (sharded over CP): reduced over DP

    @property
    def pre_bwd(self) -> float:
        return 2.0 * self.pre_fwd

    @property
    def post_bwd(self) -> float:
        return 2.0 * self.post_fwd


def linear_costs(scenario: Scenario, cost: CostModel) -> LinearCosts:
    """QKV/O projections, FFN or MoE FFN, and norms for L/cp tokens on one worker.

    ``attention_only`` scenarios (core-attention microbenchmarks) zero everything but the
    activation hand-off size.
    """
    m, par = scenario.model, scenario.parallelism
    n = scenario.workload.packed_length // par.cp
    dt = m.dtype_bytes
    if scenario.attention_only:
        return LinearCosts(0.0, 0.0, 0.0, float(n * m.hidden * dt), 0.0, 0.0)
    qkv = float(cost.gemm(n, (m.heads_q + 2 * m.heads_kv) * m.head_dim, m.hidden))
    out = float(cost.gemm(n, m.hidden, m.heads_q * m.head_dim))
    norms = 2 * float(cost.elementwise(4 * n * m.hidden * dt))
    attn_params = m.hidden * (m.heads_q + 2 * m.heads_kv) * m.head_dim
    attn_params += m.heads_q * m.head_dim * m.hidden
    ep_comm, expert_params = 0.0, 0.0
    if m.is_moe:
        ffn, expert_params, ep_comm = moe_ffn(scenario, cost, n)
        ffn_params = float(m.hidden * m.experts)  # the router is replicated
    else:
        assert m.ffn is not None
        ffn = float(cost.gemm(n, 2 * m.ffn, m.hidden)) + float(cost.gemm(n, m.hidden, m.ffn))
        ffn_params = 3.0 * m.hidden * m.ffn
    return LinearCosts(
        pre_fwd=qkv + norms / 2,
        post_fwd=out + ffn + norms / 2,
        ep_comm_fwd=ep_comm,
        act_bytes=float(n * m.hidden * dt),
        grad_bytes=float((attn_params + ffn_params) * dt),
        expert_grad_bytes=float(expert_params * dt),
    )


def moe_ffn(scenario: Scenario, cost: CostModel, n: int) -> tuple[float, float, float]:
    """(compute s, expert parameters per worker, all-to-all s) of a balanced EP=cp MoE layer."""
    m, cp = scenario.model, scenario.parallelism.cp
    assert m.expert_ffn is not None
    local_experts = max(m.experts // cp, 1)
    tokens = n * m.top_k
    tpe = np.full(local_experts, tokens / local_experts)
    gemm = float(cost.grouped_gemm(tpe, 2 * m.expert_ffn, m.hidden))
    gemm += float(cost.grouped_gemm(tpe, m.hidden, m.expert_ffn))
    router = float(cost.gemm(n, m.experts, m.hidden))
    params = 3.0 * m.hidden * m.expert_ffn * local_experts
    comm = 0.0
    if cp > 1:
        nbytes = tokens * m.hidden * m.dtype_bytes
        gpn = min(cp, int(cost.fabric.gpus_per_node))
        comm = 2 * cost.collective("all_to_all", nbytes, cp, gpus_per_node=gpn).seconds
    return gemm + router, params, comm


@dataclass(frozen=True)
class SlotAttention:
    """Per-slot attention inputs: per-worker compute, pool-level per-chunk comm."""

    compute_fwd: np.ndarray  # [E, m, W] seconds (whole forward, all chunks)
    compute_bwd: np.ndarray
    dispatch_fwd: np.ndarray  # [E, m] seconds per chunk
    return_fwd: np.ndarray
    dispatch_bwd: np.ndarray
    return_bwd: np.ndarray
    chunks: int
    pair_heads: np.ndarray  # [E, m] planned pair-heads of each slot (for the FLOPs check)


def slot_attention(scenario: Scenario, cost: CostModel, plan: StepPlan) -> SlotAttention:
    """Cost every slot's attention plan once; layers and stages reuse it (one plan per step)."""
    m = scenario.model
    gpn = int(cost.fabric.gpus_per_node)
    flat = [p for row in plan.slots for p in row]
    shape = (plan.pipelines, plan.microbatches)

    def compute(backward: bool) -> np.ndarray:
        rows = [
            cost.attention(
                # Plans count pair-heads; the kernel model wants pairs per head.
                p.worker_pairs / np.maximum(p.worker_heads, 1),
                p.worker_doc_len,
                p.worker_heads,
                m.heads_kv,
                m.head_dim,
                backward=backward,
            )
            for p in flat
        ]
        return np.asarray(rows, dtype=float).reshape(*shape, -1)

    def a2a(mats: Iterator[np.ndarray]) -> np.ndarray:
        # One [W, W] matrix at a time: at 131k GPUs a list of them all holds 128 MiB.
        return np.asarray([cost.all_to_allv(s, gpus_per_node=gpn) for s in mats]).reshape(shape)

    chunks = max(p.chunks for p in flat)
    per = [1.0 / p.chunks for p in flat]
    d_f, r_f, d_b, r_b = (
        a2a(mat(p) * c for p, c in zip(flat, per, strict=True))
        for mat in (
            lambda p: p.dispatch_bytes,
            lambda p: p.return_bytes,
            # Backward: Q, K, V again plus dO (home -> worker, the reverse of O's return) ...
            lambda p: p.dispatch_bytes + p.return_bytes.T,
            # ... and dQ, dK, dV back to their homes (the reverse of the dispatch).
            lambda p: p.dispatch_bytes.T,
        )
    )
    return SlotAttention(
        compute_fwd=compute(False),
        compute_bwd=compute(True),
        dispatch_fwd=d_f,
        return_fwd=r_f,
        dispatch_bwd=d_b,
        return_bwd=r_b,
        chunks=chunks,
        pair_heads=np.array([p.total_pairs for p in flat]).reshape(shape),
    )
