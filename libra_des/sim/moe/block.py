"""Every kernel of one prefill transformer block outside the routed experts, per GPU.

A block runs, on each GPU's own tokens (DP attention; TP attention splits the heads):

* ``residual_norm_attn``: the residual add fused with the input RMSNorm (SGLang's
  ``fused_add_rmsnorm``): reads the hidden state and the residual, writes both;
* ``qkv_proj``: one GEMM ``[T, hidden] x [hidden, (q + 2 kv) head_dim]``;
* ``rope``: rotary embedding (with Qwen3/GLM's per-head q/k norm) over q and k, read and
  written once;
* ``attention``: varlen causal attention (the profile's FlashAttention model);
* ``o_proj``: ``[T, q head_dim] x [q head_dim, hidden]``;
* ``residual_norm_moe``: the residual add fused with the post-attention RMSNorm;
* ``gate``: the router GEMM ``[T, hidden] x [hidden, experts]``;
* ``gate_topk``: softmax and top-k over the fp32 router logits (reads ``T x E`` logits,
  writes ``T x k`` ids and weights);
* ``permute``: the tokens laid out by destination expert (reads ``T`` hidden states, writes
  ``T k`` rows);
* ``shared_experts``: the shared experts' two GEMMs on the GPU's own tokens (GLM-4.5);
* ``unpermute``: after combine, the top-k outputs of every token summed with their routing
  weights (reads ``T k`` rows, writes ``T``); the residual add that follows is fused into the
  next block's ``residual_norm_attn``.

Memory-bound kernels are priced from their bytes on the profile's element-wise roofline
(``CostModel.elementwise``: HBM bandwidth at the profile's element-wise efficiency), GEMMs on
its GEMM roofline. Each kernel pays the profile's ``launch_s`` once: the GPU-side gap between
back-to-back kernels of a stream (the shipped profiles state 2 us, an assumption). Where the
host must launch a kernel right after it synchronised with the GPU (the CPU plan's metadata),
the host's launch path adds one launch (``sim.moe.host.LAUNCH_S``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from libra_des.base.kernel import Floats

#: Bytes of one fp32 router logit (the router's softmax runs in fp32 in SGLang's top-k).
LOGIT_BYTES = 4
#: Bytes per (token, k) entry of the top-k output: an int32 id and an fp32 weight.
TOPK_ENTRY_BYTES = 8

#: Kernels before the gate, in stream order (the ``attention`` stage's parts).
PRE_GATE = ("residual_norm_attn", "qkv_proj", "rope", "attention", "o_proj",
            "residual_norm_moe")
#: The gate's kernels (the ``gate`` stage's parts).
GATE = ("gate", "gate_topk", "permute")
#: After combine (a group-wide stage: the layer ends when the slowest GPU has summed).
TAIL = ("unpermute",)
#: Every kernel outside the routed experts, as result breakdowns name them.
NON_EXPERT = (*PRE_GATE, *GATE, "shared_experts", *TAIL)


@dataclass(frozen=True)
class BlockKernels:
    """Solo seconds per GPU (``[G]`` arrays) of every kernel of :data:`NON_EXPERT`."""

    seconds: dict[str, np.ndarray]

    def total(self, names: tuple[str, ...]) -> np.ndarray:
        # numpy's stubs type a reduction over a list as Any; the rows are [G] float arrays.
        total: Floats = np.sum([self.seconds[n] for n in names], axis=0)
        return total

    def parts(self, names: tuple[str, ...], g: int) -> tuple[tuple[str, float], ...]:
        """``(kernel, seconds)`` of GPU ``g``, in stream order."""
        return tuple((n, float(self.seconds[n][g])) for n in names)

    def scaled(self, names: tuple[str, ...], factor: np.ndarray) -> BlockKernels:
        """The kernels of ``names`` slowed by the per-GPU ``factor`` (runtime noise)."""
        return BlockKernels({n: s * factor if n in names else s
                             for n, s in self.seconds.items()})


def elementwise_bytes(tokens: np.ndarray, hidden: int, dtype_bytes: int, top_k: int,
                      experts: int, q_heads: int, kv_heads: int, head_dim: int
                      ) -> dict[str, np.ndarray]:
    """Bytes read plus written by each memory-bound kernel, per GPU (see module doc)."""
    t = np.asarray(tokens, dtype=np.float64)
    row = hidden * dtype_bytes
    return {
        "residual_norm_attn": 4.0 * t * row,
        "rope": 2.0 * t * (q_heads + kv_heads) * head_dim * dtype_bytes,
        "residual_norm_moe": 4.0 * t * row,
        "gate_topk": t * (experts * LOGIT_BYTES + top_k * TOPK_ENTRY_BYTES),
        "permute": t * row * (1.0 + top_k),
        "unpermute": t * row * (1.0 + top_k) + t * top_k * TOPK_ENTRY_BYTES,
    }
