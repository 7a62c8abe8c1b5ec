"""The routing draws of ``libra_des.workload.uniform_kernel.route_tokens`` one token at a time in
numpy and Python floats: the reference the kernel is compared with bit for bit
(tests/test_uniform_kernel.py).

Every step is the kernel's arithmetic read literally: the logits in float32 (the bias, then
one product and one sum per latent dimension, in order), ``exp(logit - max)`` by the same
float32 polynomial, float64 block sums in row order (block ``b``: experts ``b, b + 16, ..``),
and for each draw a scan of the block prefixes, then of one block's partial sums, with the
drawn weight subtracted from the prefixes afterwards (a rescale where rounding leaves nothing
to draw from).
"""

from __future__ import annotations

import numpy as np

from libra_des.workload.uniform_kernel import (
    BLOCKS,
    EXP_COEFFS,
    EXP_FLOOR,
    LN2_HI,
    LN2_LO,
    LOG2E,
)


def logits(latent: np.ndarray, gate: np.ndarray, bias_row: np.ndarray) -> np.ndarray:
    """One token's float32 logits, padded with -inf to a whole number of blocks."""
    e = gate.shape[1]
    width = -(-e // BLOCKS) * BLOCKS
    out = np.full(width, -np.inf, dtype=np.float32)
    out[:e] = bias_row
    for d in range(latent.size):
        out[:e] += latent[d] * gate[d]
    return out


def weights(logit: np.ndarray) -> np.ndarray:
    """``exp(logit - max)`` in float32 by Cody-Waite reduction and the polynomial (0 below
    ``EXP_FLOOR``)."""
    shifted = logit - logit.max()
    x = np.maximum(shifted, EXP_FLOOR)
    n = np.floor(x * LOG2E + np.float32(0.5))
    r = (x - n * LN2_HI) - n * LN2_LO
    p = EXP_COEFFS[0]
    for coeff in EXP_COEFFS[1:]:
        p = p * r + coeff
    w = (p * r) * r + r + np.float32(1.0)
    scale = ((n.astype(np.int32) + np.int32(127)) << np.int32(23)).view(np.float32)
    return np.where(shifted >= EXP_FLOOR, w * scale, np.float32(0.0))


def block_prefix(weight: np.ndarray) -> list[float]:
    """Cumulative float64 block sums, each block summed in row order."""
    sums = np.add.accumulate(weight.reshape(-1, BLOCKS).astype(np.float64), axis=0)[-1]
    return [float(s) for s in np.cumsum(sums)]


def draw(weight: np.ndarray, prefix: list[float], u: float) -> int:
    """The expert ``u`` picks, or -1 where rounding walks past the end."""
    target = u * prefix[-1]
    b = sum(p <= target for p in prefix)
    if b >= BLOCKS:
        return -1
    rest = target - prefix[b - 1] if b else target
    within, j = 0.0, 0
    for w in weight[b::BLOCKS]:
        within += float(w)
        j += within <= rest
    return b + j * BLOCKS if j < weight.size // BLOCKS else -1


def token_experts(logit: np.ndarray, uniforms: np.ndarray) -> list[int]:
    """One token's experts in the kernel's slot order (the first pick last)."""
    logit = logit.copy()
    weight = weights(logit)
    prefix = block_prefix(weight)
    picks = []
    for u in uniforms:
        c = draw(weight, prefix, float(u)) if prefix[-1] > 0.0 else -1
        if c < 0:
            weight = weights(logit)
            prefix = block_prefix(weight)
            c = draw(weight, prefix, float(u))
        if c < 0:
            c = int(np.flatnonzero(weight > 0.0)[-1])
        picks.append(c)
        w = float(weight[c])
        for i in range(c % BLOCKS, BLOCKS):
            prefix[i] -= w
        weight[c] = 0.0
        logit[c] = -np.inf
    return picks[::-1]


def route_tokens(latent: np.ndarray, gate: np.ndarray, bias: np.ndarray, dataset: np.ndarray,
                 uniforms: np.ndarray) -> np.ndarray:
    """``[tokens, k]`` experts, as ``uniform_kernel.route_tokens`` writes them."""
    rows = [token_experts(logits(latent[t], gate, bias[dataset[t]]), uniforms[t])
            for t in range(latent.shape[0])]
    return np.array(rows, dtype=np.int64).reshape(latent.shape[0], uniforms.shape[1])
