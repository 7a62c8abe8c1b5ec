"""Training memory per GPU: model states and activations, as pure arithmetic on shapes.

The model (every number's source is named; "assumption" means ours):

* **Model states** per parameter (Megatron-LM distributed-optimizer guide, bf16 training with
  fp32 gradient accumulation): 2 bytes of bf16 weight, 4 bytes of fp32 gradient, and 12 bytes
  of fp32 optimizer state (main weight, Adam m and v) that the distributed optimizer (ZeRO-1)
  shards over the parameter's data-parallel reduction group. Replicated weights (attention,
  norms, router, dense FFN, shared experts, embedding, LM head) are reduced over DP x CP, so
  their optimizer state is sharded over DP x CP; routed experts are sharded over EP (the CP
  group, as the simulator runs them) and reduced, and their optimizer sharded, over DP.
  ``tp`` divides every per-layer weight (Megatron-style tensor parallelism).
* **Embedding and LM head** are untied (Qwen3-30B-A3B's ``tie_word_embeddings: false``): the
  embedding lives on the first pipeline stage, the LM head on the last.
* **Activations** per token per layer (bf16, FlashAttention so no score matrix, no dropout,
  SwiGLU FFN; the accounting of Korthikanti et al. 2022, "Reducing Activation Recomputation in
  Large Transformer Models", redone for this layer shape):

  - norms: inputs and outputs of the two RMSNorms, 4 x hidden values;
  - qkv: Q, K, V saved by the attention kernel, (h_q + 2 h_kv) x head_dim values;
  - attn_out: O (the output projection's input) plus the fp32 log-sum-exp per query head;
  - ffn (dense): gate and up outputs and the SwiGLU output, 3 x ffn values (a fused SwiGLU
    kernel, as Megatron-core's, recomputes silu(gate) in its backward; eager PyTorch also
    keeps silu(gate), a fourth ffn-wide tensor);
  - ffn (MoE): per routed copy the dispatched input, gate/up/SwiGLU outputs and the expert
    output (2 x hidden + 3 x expert_ffn values), the fp32 router probabilities over all
    experts, and the shared experts like a dense FFN.

* **Recomputation** (what stays stashed per layer and microbatch until its backward):

  - ``none``: everything above;
  - ``selective``: our definition, following Megatron-core's ``recompute_modules`` for norms
    and activation functions: the two norm outputs and the SwiGLU outputs are recomputed from
    their inputs (element-wise, cheap); Q, K, V and O stay. FlashAttention already stores no
    score matrix, so recomputing the attention core (Korthikanti's "selective") saves nothing
    more and is not part of it;
  - ``full``: only the layer's input (hidden values per token) stays; the whole layer forward,
    including the attention exchange, runs again before its backward.

* **Transient** (at most one at a time, on top of the stash): one layer's full activation set
  (the layer being recomputed or back-propagated, assumption: its gradient buffers reuse the
  freed stash), and on the last stage the logits of one microbatch in bf16 (fused
  cross-entropy computes the gradient in place, Megatron-core's fused vocab-parallel
  cross-entropy).
"""

from __future__ import annotations

from dataclasses import dataclass

from libra_des.config import ModelSpec
from libra_des.errors import InputError
from libra_des.hardware.gpu_records import gpu_record

#: Bytes per parameter: bf16 weight, fp32 gradient, fp32 main weight + Adam m + v
#: (Megatron-LM docs, "Distributed Optimizer": 6 + 12/d bytes per parameter).
WEIGHT_BYTES = 2.0
GRAD_BYTES = 4.0
OPTIMIZER_BYTES = 12.0
#: Bytes of one fp32 value (router probabilities, log-sum-exp).
FP32 = 4.0

RECOMPUTE = ("none", "selective", "full")
GIB = 2.0**30


def device_hbm(gpu_name: str) -> float:
    """HBM bytes of a GPU by its record (:mod:`libra_des.hardware.gpu_records`)."""
    return gpu_record(gpu_name).hbm_bytes.value


@dataclass(frozen=True)
class LayerParams:
    """Parameters of one transformer layer on one GPU: replicated part and routed experts."""

    replicated: float
    experts: float


def layer_params(m: ModelSpec, ep: int, tp: int = 1) -> LayerParams:
    """Per-GPU parameters of one layer (experts split over ``ep`` GPUs, all over ``tp``)."""
    attn = m.hidden * (m.heads_q + 2 * m.heads_kv) * m.head_dim + m.heads_q * m.head_dim * m.hidden
    norms = 2 * m.hidden
    if m.is_moe:
        assert m.expert_ffn is not None
        one = 3.0 * m.hidden * m.expert_ffn
        replicated = attn + norms + m.hidden * m.experts + m.shared_experts * one
        experts = one * m.experts / ep
    else:
        assert m.ffn is not None
        replicated, experts = attn + norms + 3.0 * m.hidden * m.ffn, 0.0
    return LayerParams(replicated / tp, experts / tp)


@dataclass(frozen=True)
class StateBytes:
    """Model-state bytes of one GPU: weights, gradients, optimizer states."""

    weights: float
    gradients: float
    optimizer: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer


def state_bytes(
    replicated: float,
    experts: float,
    replicated_group: int,
    expert_group: int,
    distributed_optimizer: bool = True,
) -> StateBytes:
    """Weights, grads and (ZeRO-1-sharded) optimizer states of a GPU's parameters.

    ``replicated_group``/``expert_group``: GPUs that reduce (and shard the optimizer of)
    each kind of parameter.
    """
    params = replicated + experts
    if distributed_optimizer:
        opt = OPTIMIZER_BYTES * (replicated / replicated_group + experts / expert_group)
    else:
        opt = OPTIMIZER_BYTES * params
    return StateBytes(WEIGHT_BYTES * params, GRAD_BYTES * params, opt)


def activation_parts(m: ModelSpec, attention_only: bool = False) -> dict[str, float]:
    """Bytes per token per layer of every saved tensor group with no recomputation."""
    dt = float(m.dtype_bytes)
    parts = {
        "norms": 4.0 * m.hidden * dt,
        "qkv": (m.heads_q + 2 * m.heads_kv) * m.head_dim * dt,
        "attn_out": m.heads_q * m.head_dim * dt + m.heads_q * FP32,
        "ffn": 0.0,
    }
    if attention_only:
        # Core-attention microbenchmarks: the kernel's inputs and outputs only.
        parts["norms"] = 0.0
        return parts
    if m.is_moe:
        assert m.expert_ffn is not None
        routed = m.top_k * (2.0 * m.hidden + 3.0 * m.expert_ffn) * dt
        parts["ffn"] = routed + m.experts * FP32 + m.shared_experts * 3.0 * m.expert_ffn * dt
    else:
        assert m.ffn is not None
        parts["ffn"] = 3.0 * m.ffn * dt
    return parts


def recomputed_share(m: ModelSpec, attention_only: bool = False) -> float:
    """Bytes per token per layer that ``selective`` drops (norm outputs, SwiGLU outputs)."""
    if attention_only:
        return 0.0
    dt = float(m.dtype_bytes)
    if m.is_moe:
        assert m.expert_ffn is not None
        act = (m.top_k + m.shared_experts) * m.expert_ffn * dt
    else:
        assert m.ffn is not None
        act = m.ffn * dt
    return 2.0 * m.hidden * dt + act


def stashed_per_token(m: ModelSpec, recompute: str, attention_only: bool = False) -> float:
    """Bytes per token per layer kept from a layer's forward until its backward."""
    full = sum(activation_parts(m, attention_only).values())
    if recompute == "none":
        return full
    if recompute == "selective":
        return full - recomputed_share(m, attention_only)
    if recompute == "full":
        # The layer input: the hidden state (for core-attention-only runs, Q, K and V).
        if attention_only:
            return activation_parts(m, True)["qkv"]
        return m.hidden * float(m.dtype_bytes)
    raise InputError("memory.recompute", recompute, " | ".join(RECOMPUTE))


def layer_working_per_token(m: ModelSpec, attention_only: bool = False) -> float:
    """One layer's full activation set per token (the transient of a backward or recompute)."""
    return sum(activation_parts(m, attention_only).values())


def logits_bytes(m: ModelSpec, tokens: float) -> float:
    """bf16 logits of ``tokens`` tokens (the fused cross-entropy's gradient reuses them)."""
    return float(tokens) * m.vocab * float(m.dtype_bytes)


def embedding_params(m: ModelSpec, tp: int = 1) -> float:
    """Parameters of the input embedding (or of the untied LM head): vocab x hidden."""
    return float(m.vocab * m.hidden) / tp
