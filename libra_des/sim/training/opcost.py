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
* The backward sends dO along the reverse of the O return and returns dQ, dK, dV (the reverse
  of the dispatch). Only when the forward's remote buffers were freed
  (``memory.keep_remote_kv: false``, no full recomputation) does it re-send Q, K, V as well.
  Attention backward FLOPs come from the cost model.
* Recomputation (``memory.recompute``) is priced on the backward op: ``selective`` re-runs the
  two norms and the SwiGLU (element-wise passes); ``full`` re-runs the whole layer forward
  before its backward: projections, FFN, expert all-to-all and attention, including the
  forward exchange when the remote tiles were not kept (then the O return only).
* Linear parts run on the padded length ``L/cp`` for the fixed-length packers (the padded
  tensors are computed); WLB-LLM's variable-length microbatches run on their real tokens
  (``token_share`` = tokens / L per slot; GEMM time taken as linear in tokens, which holds at
  these sizes where GEMMs are compute-bound).
* MoE FFNs use expert parallelism over the replica's CP group; their all-to-all dispatch and
  combine are exposed communication. Expert loads per layer follow the routing model
  (``workload.expert_skew``, default on): the layer lasts as long as its hottest EP rank's
  experts (backward 2x, plus once more under full recomputation) and its all-to-all scales
  with the hottest rank's share; ``expert_skew: false`` routes perfectly evenly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from libra_des.config import MemorySpec, ModelSpec, RoutingSpec
from libra_des.config import TrainingScenario as Scenario
from libra_des.hardware.collectives.a2a_batch import all_to_allv_batch
from libra_des.hardware.costs import CostModel
from libra_des.plan.step import StepPlan
from libra_des.plan.types import AttentionPlan
from libra_des.workload.expert_load import expected_loads, rank_loads


@dataclass(frozen=True)
class LinearCosts:
    """Per-worker, per-layer seconds of the non-attention parts of one microbatch."""

    pre_fwd: float
    post_fwd: float
    ep_comm_fwd: float
    act_bytes: float
    grad_bytes: float  # replicated weights (attention, router, dense FFN): reduced over DP x CP
    expert_grad_bytes: float = 0.0  # this worker's experts (sharded over CP): reduced over DP
    recompute_pre: float = 0.0  # forward work re-run before the backward (memory.recompute)
    recompute_post: float = 0.0
    recompute_ep: float = 0.0  # expert all-to-all re-run by a full recomputation
    token_share: np.ndarray | None = None  # [E, m] real tokens / padded tokens per slot
    # Expert skew per model layer: extra forward seconds of the hottest EP rank, and the
    # factor on the expert all-to-all (None: balanced routing).
    expert_extra: np.ndarray | None = None
    ep_factor: np.ndarray | None = None
    backward_passes: float = 2.0  # expert work of a backward in forwards (3 with full recompute)

    @property
    def pre_bwd(self) -> float:
        return 2.0 * self.pre_fwd + self.recompute_pre

    @property
    def post_bwd(self) -> float:
        return 2.0 * self.post_fwd + self.recompute_post

    @property
    def ep_comm_bwd(self) -> float:
        """The backward's expert all-to-all moves the forward's bytes (plus a recomputation's)."""
        return self.ep_comm_fwd + self.recompute_ep


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
        act_width = (m.top_k + m.shared_experts) * (m.expert_ffn or 0)
    else:
        assert m.ffn is not None
        ffn = float(cost.gemm(n, 2 * m.ffn, m.hidden)) + float(cost.gemm(n, m.hidden, m.ffn))
        ffn_params = 3.0 * m.hidden * m.ffn
        act_width = m.ffn
    pre, post = qkv + norms / 2, out + ffn + norms / 2
    redo = scenario.memory.recompute
    if redo == "full":
        again = (pre, post, ep_comm)
    elif redo == "selective":
        # SwiGLU re-run: read gate and up, write the product (3 values per token and width).
        act = float(cost.elementwise(3 * n * act_width * dt))
        again = (norms / 2, norms / 2 + act, 0.0)
    else:
        again = (0.0, 0.0, 0.0)
    skew: tuple[np.ndarray | None, np.ndarray | None] = (None, None)
    if m.is_moe and scenario.workload.expert_skew and par.cp > 1 and m.experts % par.cp == 0:
        skew = expert_skew(scenario, cost, n)
    return LinearCosts(
        expert_extra=skew[0],
        ep_factor=skew[1],
        backward_passes=3.0 if redo == "full" else 2.0,
        pre_fwd=pre,
        post_fwd=post,
        ep_comm_fwd=ep_comm,
        act_bytes=float(n * m.hidden * dt),
        grad_bytes=float((attn_params + ffn_params) * dt),
        expert_grad_bytes=float(expert_params * dt),
        recompute_pre=again[0],
        recompute_post=again[1],
        recompute_ep=again[2],
    )


def expert_skew(scenario: Scenario, cost: CostModel, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per layer: (extra forward expert seconds of the hottest EP rank, all-to-all factor).

    Expert loads come from the routing model (:mod:`libra_des.workload.expert_load`); the
    layer waits for its hottest rank (the combine all-to-all is a barrier), whose grouped GEMM
    runs its experts' expected tokens. Its all-to-all time scales with the bytes it receives
    (hottest rank / mean rank), the receiver being the bottleneck.
    """
    m, cp = scenario.model, scenario.parallelism.cp
    assert m.expert_ffn is not None
    spec = scenario.workload.routing or RoutingSpec()
    ranks = rank_loads(expected_loads(m, spec), cp) * n  # [layers, ep, local] tokens
    per_rank = ranks.sum(axis=-1)
    hot = per_rank.argmax(axis=-1)
    base = np.full(ranks.shape[-1], n * m.top_k / ranks.shape[-1])
    balanced = expert_gemm(cost, m, base)
    extra = np.array([expert_gemm(cost, m, ranks[layer, r]) - balanced
                      for layer, r in enumerate(hot)])
    factor = per_rank.max(axis=-1) / per_rank.mean(axis=-1)
    return np.maximum(extra, 0.0), factor


def expert_gemm(cost: CostModel, m: ModelSpec, tokens_per_expert: np.ndarray) -> float:
    """Seconds of one rank's grouped expert GEMMs (gate+up, then down)."""
    assert m.expert_ffn is not None
    gemm = float(cost.grouped_gemm(tokens_per_expert, 2 * m.expert_ffn, m.hidden))
    return gemm + float(cost.grouped_gemm(tokens_per_expert, m.hidden, m.expert_ffn))


def moe_ffn(scenario: Scenario, cost: CostModel, n: int) -> tuple[float, float, float]:
    """(compute s, expert parameters per worker, all-to-all s) of a balanced EP=cp MoE layer."""
    m, cp = scenario.model, scenario.parallelism.cp
    assert m.expert_ffn is not None
    local_experts = max(m.experts // cp, 1)
    tokens = n * m.top_k
    gemm = expert_gemm(cost, m, np.full(local_experts, tokens / local_experts))
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
    # Full recomputation: the forward attention re-run before each backward (per chunk).
    recompute: bool = False
    recompute_dispatch: np.ndarray | None = None  # [E, m]
    recompute_return: np.ndarray | None = None


def backward_traffic(mem: MemorySpec) -> tuple[float, float, float]:
    """(Q/K/V re-sent, recompute dispatch, recompute O return) as shares of the forward plan.

    The backward has the forward's remote Q, K, V when they were kept or just recomputed; a
    full recomputation re-fetches the remote inputs unless kept, and returns O again.
    """
    full = mem.recompute == "full"
    resend = 0.0 if (mem.keep_remote_kv or full) else 1.0
    redo_d = 1.0 if (full and not mem.keep_remote_kv) else 0.0
    return resend, redo_d, 1.0 if full else 0.0


def attention_seconds(
    cost: CostModel, m: ModelSpec, plans: list[AttentionPlan], backward: bool
) -> np.ndarray:
    """[len(plans), W] seconds of each worker's attention call, plans of equal width W."""
    heads = np.stack([p.worker_heads for p in plans])
    shard = None
    if any(p.worker_query_len is not None for p in plans):
        # Chunked calls (WLB-LLM's CP shards): their shape; whole documents elsewhere.
        shard = (np.stack([p.worker_doc_len if p.worker_query_len is None
                           else p.worker_query_len for p in plans]),
                 np.stack([p.worker_doc_len if p.worker_key_len is None
                           else p.worker_key_len for p in plans]))
    return cost.attention(
        # Plans count pair-heads; the kernel model wants pairs per head.
        np.stack([p.worker_pairs for p in plans]) / np.maximum(heads, 1),
        np.stack([p.worker_doc_len for p in plans]),
        heads,
        m.heads_kv,
        m.head_dim,
        backward=backward,
        shard=shard,
    )


def slot_attention(scenario: Scenario, cost: CostModel, plan: StepPlan) -> SlotAttention:
    """Cost every slot's attention plan once; layers and stages reuse it (one plan per step)."""
    m = scenario.model
    gpn = int(cost.fabric.gpus_per_node)
    flat = [p for row in plan.slots for p in row]
    shape = (plan.pipelines, plan.microbatches)

    # Every slot's workers in one elementwise call (the same values as slot by slot) when the
    # slots are equally wide; one call per slot is slow at the largest scales otherwise.
    groups = [flat] if len({p.workers for p in flat}) == 1 else [[p] for p in flat]

    def compute(backward: bool) -> np.ndarray:
        rows = [attention_seconds(cost, m, g, backward) for g in groups]
        return np.concatenate(rows).astype(float).reshape(*shape, -1)

    def a2a(mats: Iterator[np.ndarray]) -> np.ndarray:
        # A block of [W, W] matrices at a time: at 131k GPUs a list of them all holds 128 MiB.
        return all_to_allv_batch(cost, mats, gpus_per_node=gpn).reshape(shape)

    chunks = max(p.chunks for p in flat)
    per = [1.0 / p.chunks for p in flat]
    resend, redo_d, redo_r = backward_traffic(scenario.memory)
    matrices: tuple[Callable[[AttentionPlan], np.ndarray], ...] = (
        lambda p: p.dispatch_bytes,
        lambda p: p.return_bytes,
        # Backward: dO (home -> worker, the reverse of O's return), plus Q, K, V again
        # when the forward's remote buffers were freed ...
        lambda p: resend * p.dispatch_bytes + p.return_bytes.T,
        # ... and dQ, dK, dV back to their homes (the reverse of the dispatch).
        lambda p: p.dispatch_bytes.T,
    )
    d_f, r_f, d_b, r_b = (
        a2a(mat(p) * c for p, c in zip(flat, per, strict=True)) for mat in matrices)
    full = redo_r > 0
    return SlotAttention(
        compute_fwd=compute(False),
        compute_bwd=compute(True),
        dispatch_fwd=d_f,
        return_fwd=r_f,
        dispatch_bwd=d_b,
        return_bwd=r_b,
        chunks=chunks,
        pair_heads=np.array([p.total_pairs for p in flat]).reshape(shape),
        recompute=full,
        recompute_dispatch=d_f * redo_d if full else None,
        recompute_return=r_f * redo_r if full else None,
    )
