"""Seconds and bytes of every stage of one MoE prefill layer, from its plan and a cost model.

Assumptions (stated once):

* DP attention by default: GPU ``g`` runs attention (QKV and output projections plus
  varlen causal attention over its own requests) for its requests. With ``parallelism.tp``
  equal to the EP size (TP attention) every GPU runs all tokens with ``heads / tp`` heads,
  framed by an all-gather and a reduce-scatter of the hidden states; a token's origin is then
  its sequence shard.
* Gate: one GEMM ``[tokens, hidden] x [hidden, experts]``; Libra's lookahead prediction is one
  more gate GEMM; Lina's path-table lookup runs on the CPU off the critical path.
* An expert is three ``hidden x expert_ffn`` matrices (gate, up, down): a grouped GEMM with
  ``n = 2 * expert_ffn, k = hidden`` then one with ``n = hidden, k = expert_ffn``. Shared
  experts run on every GPU's own tokens, alongside MoE_local.
* All2All dispatch sends a token once per remote GPU that needs it; AllGather sends every
  token to every GPU (sized by the largest per-GPU share, as an all-gather-v is). Combine
  mirrors dispatch: all-to-all-v back, or a reduce-scatter after an all-gather. With
  ``balancer.dispatch_kernel`` a DeepEP kernel, the All2All moves what that kernel's paths
  move (``hardware/collectives/deepep.py``: a token once per remote node over RDMA, then over
  NVLink, for the normal kernels; one message per pair for low latency). Dispatch,
  combine and replica copies are described as :class:`~libra_des.sim.network.model.Traffic`
  (what moves), and the run's network model times them as they run (alpha-beta solo times
  on shared ports at ``fast`` fidelity, flows on the topology at ``detailed``).
* HarMoEny keeps every expert in pinned host memory: a GPU that takes pairs of an expert it
  does not hold pulls the weights over its own PCIe link (not NVLink, so no contention with
  dispatch) while its resident experts compute; those experts' GEMMs (``moe_remote``) wait.
* CPU planning (Libra sharding, HarMoEny moves): each GPU counts its pairs per expert after
  the gate and sends that row to the host (D2H, the rows in parallel over each GPU's PCIe
  link); the CPU plans over the ``[G, E]`` counts; the load matrix goes back to every GPU
  (metadata, H2D). Every host stage is priced as its serving stack runs it (``sim.moe.host``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from libra_des.config import ModelSpec
from libra_des.hardware.collectives import deepep
from libra_des.hardware.compute.grouped_kernels import FitChoice, GroupedKernel
from libra_des.hardware.costs import CostModel
from libra_des.hardware.fabric.rates import Fabric
from libra_des.plan.moe.assignment import MoeLayerPlan, materialise, static_home
from libra_des.sim.moe.block import (
    GATE,
    PRE_GATE,
    TAIL,
    BlockKernels,
    elementwise_bytes,
)
from libra_des.sim.moe.host import (
    ID_BYTES,
    HostPrices,
    HostStage,
    greedy_moves,
    metadata,
    path_lookup,
    replica_placement,
)
from libra_des.sim.network.model import Traffic


class WiringLike(Protocol):
    """The parts of a system's wiring (``sim.moe.batch.Wiring``) that change its costs."""

    @property
    def allgather(self) -> bool: ...
    @property
    def gpu_predict(self) -> bool: ...
    @property
    def cpu_plan(self) -> bool: ...
    @property
    def two_stage(self) -> bool: ...
    @property
    def prefetch(self) -> bool: ...
    @property
    def fetch(self) -> bool: ...
    @property
    def cpu_predict(self) -> bool: ...
    @property
    def dispatch_kernel(self) -> str: ...


@dataclass(frozen=True)
class LayerCosts:
    """Solo seconds of one layer's stages (``[G]`` arrays are per GPU)."""

    attention: np.ndarray
    gate: np.ndarray
    predict: np.ndarray
    moe_local: np.ndarray
    moe_remote: np.ndarray
    dispatch: Traffic
    combine: Traffic
    copy: np.ndarray  # seconds of this layer's weight fetches from host memory, per GPU
    copies: tuple[Traffic, ...]  # this layer's replica copies into each GPU
    cpu: float  # routing D2H + planning
    replan: float  # CPU planning of this layer's replicas (runs during the previous layer)
    metadata: float
    lookup: float  # Lina's path-table lookup on the host (0 for the other systems)
    dispatch_bytes: float
    combine_bytes: float
    copy_bytes: float
    metadata_bytes: float
    routing_bytes: float
    #: Every non-expert kernel's seconds per GPU (the ``attention``, ``gate``, ``moe_local``
    #: and ``unpermute`` stages' parts; ``attention`` and ``gate`` above are their sums).
    block: BlockKernels | None = None

    @property
    def tail(self) -> float:
        """The group-wide stage after combine: the slowest GPU's un-permute."""
        return float(self.block.total(TAIL).max()) if self.block is not None else 0.0


@dataclass(frozen=True)
class BatchShape:
    """Tokens and documents per GPU for one batch (attention and gate costs)."""

    origin: np.ndarray  # [T] origin GPU of every token
    tokens: np.ndarray  # [G] tokens per GPU
    docs: list[np.ndarray]  # per GPU, the document lengths its attention runs over
    heads_div: int  # 1 for DP attention, tp for TP attention


def batch_shape(request_lengths: np.ndarray, request: np.ndarray, gpus: int, tp: int) -> BatchShape:
    """Token origins: a request's GPU (DP attention) or a sequence shard (TP attention)."""
    tokens = request.size
    if tp > 1:
        origin = (np.arange(tokens) * gpus) // max(tokens, 1)
        docs = [np.asarray(request_lengths)] * gpus
    else:
        req_gpu = (np.arange(request_lengths.size) * gpus) // request_lengths.size
        origin = req_gpu[request]
        docs = [np.asarray(request_lengths)[req_gpu == g] for g in range(gpus)]
    per_gpu = np.bincount(origin, minlength=gpus)
    return BatchShape(origin.astype(np.int64), per_gpu, docs, tp if tp > 1 else 1)


class StageCoster:
    """Costs stages with the project's :class:`~libra_des.hardware.costs.CostModel`."""

    def __init__(self, cost: CostModel, fabric: Fabric, model: ModelSpec, gpus: int,
                 kernel: GroupedKernel | None = None) -> None:
        self.cost = cost
        self.fabric = fabric
        self.model = model
        self.gpus = gpus
        #: The system's grouped-GEMM kernel for the model's dtype (None: the cost model's
        #: default constants, BF16), with the constants of its fit nearest the model's expert
        #: shape; ``fit`` says which fit and how far the shape lies from its data.
        self.fit: FitChoice | None = None
        if kernel is not None:
            kernel, self.fit = kernel.at_shape(model.hidden, model.expert_ffn or model.hidden)
        self.kernel = kernel
        self.dtype = kernel.dtype if kernel is not None else "bf16"
        self.per_node = min(fabric.gpus_per_node, gpus)
        self.token_bytes = model.hidden * model.dtype_bytes
        #: Per-call costs of the host stages: the profile's measured block, else defaults.
        self.prices = HostPrices.of(cost.profile.host)

    # ------------------------------------------------------------------ compute
    def block(self, shape: BatchShape) -> BlockKernels:
        """Every kernel of the block outside the routed experts (``sim.moe.block``), per GPU."""
        m, div = self.model, shape.heads_div
        q_heads, kv_heads = m.heads_q // div, max(m.heads_kv // div, 1)
        attn_tokens = shape.tokens if div == 1 else np.full(self.gpus, shape.tokens.sum())
        core = np.array(
            [self.cost.attention_docs(d, q_heads, kv_heads, m.head_dim) if d.size else 0.0
             for d in shape.docs]
        )
        if div > 1:  # TP attention: the hidden states gathered before, scattered after
            nbytes = float(shape.tokens.sum()) * self.token_bytes
            core = core + self.collective("all_gather", nbytes) + self.collective(
                "reduce_scatter", nbytes)
        moved = elementwise_bytes(shape.tokens, m.hidden, m.dtype_bytes, m.top_k, m.experts,
                                  q_heads, kv_heads, m.head_dim)
        moved["rope"] = moved["rope"] * (attn_tokens / np.maximum(shape.tokens, 1))
        seconds = {name: np.asarray(self.cost.elementwise(b)) for name, b in moved.items()}
        seconds.update(
            qkv_proj=self.gemm(attn_tokens, (q_heads + 2 * kv_heads) * m.head_dim, m.hidden),
            attention=np.asarray(core),
            o_proj=self.gemm(attn_tokens, m.hidden, q_heads * m.head_dim),
            gate=self.gate(shape.tokens),
            shared_experts=self.shared_experts(shape.tokens),
        )
        return BlockKernels(seconds)

    def attention(self, shape: BatchShape) -> np.ndarray:
        """Seconds per GPU of the kernels before the gate (a dense layer's attention half)."""
        return self.block(shape).total(PRE_GATE)

    def dense_ffn(self, shape: BatchShape) -> np.ndarray:
        ffn = self.model.ffn or 4 * self.model.hidden
        return np.asarray(
            self.gemm(shape.tokens, 2 * ffn, self.model.hidden)
            + self.gemm(shape.tokens, self.model.hidden, ffn)
        )

    def gate(self, tokens: np.ndarray) -> np.ndarray:
        return self.gemm(tokens, self.model.experts, self.model.hidden)

    def gemm(self, m: np.ndarray, n: int, k: int) -> np.ndarray:
        m = np.asarray(m, dtype=np.float64)
        out = np.zeros(m.shape)
        busy = m > 0
        if busy.any():
            out[busy] = np.asarray(self.cost.gemm(m[busy], n, k), dtype=np.float64)
        return out

    def experts_per_gpu(self, tokens_per_expert: np.ndarray) -> np.ndarray:
        """Each GPU's two grouped GEMMs over its row of ``tokens_per_expert`` [GPUs, experts]
        (experts with 0 tokens skipped), in the system's kernel. Each GPU's launch is priced
        from its own rows, so a GPU whose experts got more tokens gets the tile heights and
        the share of peak its own M gives."""
        h, f = self.model.hidden, self.model.expert_ffn or self.model.hidden
        tpe = np.asarray(tokens_per_expert)
        return np.asarray(
            self.cost.grouped_gemm_rows(tpe, 2 * f, h, self.dtype, self.kernel)
            + self.cost.grouped_gemm_rows(tpe, h, f, self.dtype, self.kernel))

    def shared_experts(self, tokens: np.ndarray) -> np.ndarray:
        if not self.model.shared_experts:
            return np.zeros(self.gpus)
        f = (self.model.expert_ffn or self.model.hidden) * self.model.shared_experts
        return np.asarray(
            self.gemm(tokens, 2 * f, self.model.hidden) + self.gemm(tokens, self.model.hidden, f)
        )

    # ------------------------------------------------------------------ communication
    def collective(self, op: str, nbytes: float) -> float:
        if nbytes <= 0 or self.gpus == 1:
            return 0.0
        res = self.cost.collective(op, nbytes, self.gpus, gpus_per_node=self.per_node)
        return float(res.seconds)

    def allgather_bytes(self, shape: BatchShape) -> float:
        """nccl-tests size of an all-gather-v: the largest share times the group size."""
        return float(shape.tokens.max()) * self.gpus * self.token_bytes

    def copies(self, copy_bytes: np.ndarray) -> tuple[Traffic, ...]:
        """Per GPU, the weight copies its copy engine receives (sources in GPU order)."""
        sources: list[list[tuple[int, float]]] = [[] for _ in range(self.gpus)]
        for src, dst in zip(*np.nonzero(copy_bytes), strict=True):
            sources[dst].append((int(src), float(copy_bytes[src, dst])))
        return tuple(Traffic.receive(g, s) for g, s in enumerate(sources))

    def host_fetch(self, copy_bytes: np.ndarray) -> np.ndarray:
        """``[G]`` seconds each GPU needs to pull its fetched experts from host memory over its
        own PCIe link (HarMoEny keeps every expert in pinned host memory)."""
        received = np.asarray(copy_bytes).sum(axis=0)
        return np.array([self.prices.seconds(HostStage(copies=1, copy_bytes=float(b)))
                         if b > 0 else 0.0 for b in received])

    def fit_report(self) -> dict[str, object]:
        """Per expert stage, the grouped-GEMM fit that priced it (``grouped_kernels``): its
        shape family, data, residuals, and whether the model's shape is extrapolated. A
        profile's own grouped-GEMM fit for the dtype prices both stages instead (``profile``)."""
        if self.dtype in self.cost.grouped_params or self.fit is None:
            one: dict[str, object] = {"kernel": "profile", "family": "profile",
                                      "extrapolated": False, "distance_octaves": 0.0}
        else:
            one = self.fit.report()
        return {stage: dict(one) for stage in ("moe_local", "moe_remote")}


def layer_costs(
    coster: StageCoster,
    shape: BatchShape,
    plan: MoeLayerPlan,
    wiring: WiringLike,
    block: BlockKernels,
    measured_cpu: bool,
    routed: np.ndarray | None = None,
) -> LayerCosts:
    """Cost every stage of one layer under ``plan`` (``block``: the non-expert kernels;
    ``routed``: the layer's ``[T, k]`` experts, which DeepEP dispatch needs per token)."""
    g = coster.gpus
    gate = block.total(GATE)
    if wiring.two_stage:
        local = coster.experts_per_gpu(plan.local)
        remote = coster.experts_per_gpu(plan.remote)
    elif wiring.fetch:
        # Resident experts first, then the experts whose weights arrive from the host.
        fetched = plan.holders & ~static_home(plan.load.shape[1], g)
        local = coster.experts_per_gpu(plan.load * ~fetched)
        remote = coster.experts_per_gpu(plan.load * fetched)
    else:
        # One grouped GEMM over all of a GPU's pairs, reported split by the local share.
        total = coster.experts_per_gpu(plan.load)
        share = plan.local.sum(axis=1) / np.maximum(plan.load.sum(axis=1), 1)
        local, remote = total * share, total * (1.0 - share)
    local = local + block.seconds["shared_experts"]
    every = tuple(range(g))
    if wiring.allgather:
        nbytes = coster.allgather_bytes(shape)
        dispatch = Traffic("all_gather", every, nbytes)
        combine = Traffic("reduce_scatter", every, nbytes)
        moved = nbytes * (g - 1)  # every GPU receives the other g - 1 shares
        d_bytes, c_bytes = moved, moved
    elif wiring.dispatch_kernel in deepep.KERNELS:
        if routed is None:
            raise ValueError("DeepEP dispatch is priced per token: pass the layer's routing")
        kernel = deepep.KERNELS[wiring.dispatch_kernel]
        dest = materialise(routed, shape.origin, plan.load)
        send = deepep.send_matrix(kernel, dest, shape.origin, g, coster.per_node,
                                  coster.token_bytes)
        dispatch = Traffic("all_to_all", every, send_bytes=send, algorithm=kernel.name)
        combine = Traffic("all_to_all", every, send_bytes=send.T, algorithm=kernel.name)
        d_bytes = c_bytes = float(send.sum())
    else:
        dispatch = Traffic("all_to_all", every, send_bytes=plan.dispatch_bytes)
        combine = Traffic("all_to_all", every, send_bytes=plan.dispatch_bytes.T)
        d_bytes = c_bytes = float(plan.dispatch_bytes.sum())
    # Each GPU sends its row of pair counts to the host and gets the load matrix back.
    experts = plan.load.shape[1]
    routing = float(plan.load.size * ID_BYTES) if wiring.cpu_plan else 0.0
    meta = float(g * plan.load.size * ID_BYTES) if wiring.cpu_plan else 0.0
    prices = coster.prices
    cpu = 0.0
    if wiring.cpu_plan:
        moves = greedy_moves(g, experts, plan.sharding_iterations)
        cpu = prices.seconds(moves)
        if measured_cpu and plan.cpu_wall_s is not None:  # our planner's wall clock instead
            cpu += plan.cpu_wall_s - prices.compute_seconds(moves)
    return LayerCosts(
        attention=block.total(PRE_GATE),
        gate=gate,
        # Lookahead: the next block's router GEMM and top-k on this block's hidden states.
        predict=block.seconds["gate"] + block.seconds["gate_topk"] if wiring.gpu_predict
        else np.zeros(g),
        moe_local=local,
        moe_remote=remote,
        dispatch=dispatch,
        combine=combine,
        copy=coster.host_fetch(plan.copy_bytes) if wiring.fetch else np.zeros(g),
        copies=() if wiring.fetch else coster.copies(plan.copy_bytes),
        cpu=cpu,
        replan=prices.seconds(replica_placement(
            g, experts, plan.replica_count - plan.vectorised_replicas, plan.vectorised_replicas))
        if wiring.prefetch else 0.0,
        # After the metadata the host launches the remote kernels (it synchronised with the
        # GPUs for the routing counts): one host launch path is exposed.
        metadata=prices.seconds(metadata(meta / g)) if wiring.cpu_plan else 0.0,
        lookup=prices.seconds(path_lookup(shape.origin.size, experts, coster.model.top_k))
        if wiring.cpu_predict else 0.0,
        dispatch_bytes=d_bytes,
        combine_bytes=c_bytes,
        copy_bytes=float(plan.copy_bytes.sum()),
        metadata_bytes=meta,
        routing_bytes=routing,
        block=block,
    )
