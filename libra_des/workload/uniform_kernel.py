"""The routing generator's hot loops (numba): Plackett-Luce top-k draws and the latent states.

:func:`route_tokens` draws each token's ``k`` experts of one layer without replacement from
the softmax of its logits (``bias + latent @ gate``), one expert at a time: that is the law of
Gumbel-top-k (the order of the first ``k`` arrivals of exponential races with rates
``exp(logit)``), drawn from ``k`` uniforms per token instead of one Gumbel per expert. The
uniforms come from the run's seeded numpy Generator. :func:`ar1_mix` and
:func:`token_latents` are the AR(1) latent step and the token mix in one pass each.

Assumptions: ``exp`` is a float32 polynomial (Cody-Waite reduction, Cephes' ``expf``
coefficients, within about 2 ulp), so the draw probabilities match the softmax to about
1e-7 relative; it is written without fast-math, so every element is computed the same way
whatever the vector width, and a seed gives the same experts on every x86 build. Experts are
grouped into ``BLOCKS`` strided blocks (expert ``c`` in block ``c % BLOCKS``) so a draw scans
block sums, then one block. tests/test_uniform_kernel.py tests the law statistically.
Compiled functions are cached on disk (``cache=True``, see ``startup.numba_module``).
"""

from __future__ import annotations

import numpy as np

from libra_des.base.startup import numba_module

numba = numba_module()

#: Strided expert blocks of a draw's two-level scan (16 float32 fill one AVX-512 vector).
BLOCKS = 16
LOG2E = np.float32(1.44269504088896341)
LN2_HI = np.float32(0.693359375)
LN2_LO = np.float32(-2.12194440e-4)
#: Below this, exp underflows float32 (the weight is 0).
EXP_FLOOR = np.float32(-87.0)
EXP_COEFFS = (np.float32(1.9875691500e-4), np.float32(1.3981999507e-3),
              np.float32(8.3334519073e-3), np.float32(4.1665795894e-2),
              np.float32(1.6666665459e-1), np.float32(5.0000001201e-1))


@numba.njit(cache=True, nogil=True)
def exp_shifted(logit: np.ndarray, top: np.float32, count: int, weight: np.ndarray,
                scale: np.ndarray) -> None:
    """``weight[c] = exp(logit[c] - top)`` for ``c < count`` (float32; 0 below ``EXP_FLOOR``);
    ``scale`` is int32 scratch of the same length (the bits of ``2**n``)."""
    p0, p1, p2, p3, p4, p5 = EXP_COEFFS
    one = np.float32(1.0)
    for c in range(count):
        x = max(logit[c] - top, EXP_FLOOR)
        n = np.floor(x * LOG2E + np.float32(0.5))
        r = (x - n * LN2_HI) - n * LN2_LO
        p = ((((p0 * r + p1) * r + p2) * r + p3) * r + p4) * r + p5
        weight[c] = (p * r) * r + r + one
        scale[c] = (np.int32(n) + np.int32(127)) << np.int32(23)
    factor = scale.view(np.float32)
    for c in range(count):
        weight[c] = weight[c] * factor[c] if logit[c] - top >= EXP_FLOOR else np.float32(0.0)


@numba.njit(cache=True, nogil=True)
def block_prefix(weight: np.ndarray, prefix: np.ndarray) -> None:
    """``prefix[b]`` = the float64 sum of blocks ``0 .. b``'s weights (block ``b``: experts
    ``b, b + BLOCKS, ..``); ``prefix[-1]`` is the total."""
    prefix[:] = 0.0
    for row in range(weight.size // BLOCKS):
        for b in range(BLOCKS):
            prefix[b] += weight[row * BLOCKS + b]
    for b in range(1, BLOCKS):
        prefix[b] += prefix[b - 1]


@numba.njit(cache=True, nogil=True)
def lane_max(logit: np.ndarray, lanes: np.ndarray) -> np.float32:
    """The largest of the padded ``logit`` (``BLOCKS`` lanes at a time, so it vectorises)."""
    lanes[:] = logit[:BLOCKS]
    for row in range(1, logit.size // BLOCKS):
        for b in range(BLOCKS):
            lanes[b] = max(lanes[b], logit[row * BLOCKS + b])
    top = lanes[0]
    for b in range(1, BLOCKS):
        top = max(top, lanes[b])
    return top


@numba.njit(cache=True, nogil=True)
def draw_one(weight: np.ndarray, prefix: np.ndarray, u: float) -> int:
    """The expert that uniform ``u`` picks with probability ``weight / prefix[-1]``: the block
    is the count of block prefixes at or below the target, the expert the count of partial
    sums of that block at or below the rest (counts, not early exits: no mispredicted
    branches). -1 when rounding walks past the end (the caller re-sums and draws again)."""
    target = u * prefix[BLOCKS - 1]
    b = 0
    for i in range(BLOCKS):
        b += prefix[i] <= target
    if b >= BLOCKS:
        return -1
    rest = target - prefix[b - 1] if b else target
    rows = weight.size // BLOCKS
    within, j = 0.0, 0
    for r in range(rows):
        within += weight[r * BLOCKS + b]
        j += within <= rest
    return b + j * BLOCKS if j < rows else -1


@numba.njit(cache=True, nogil=True)
def route_tokens(latent: np.ndarray, gate: np.ndarray, bias: np.ndarray, dataset: np.ndarray,
                 uniforms: np.ndarray, out: np.ndarray) -> None:
    """``out[t]`` = token ``t``'s ``k`` experts (``k = out.shape[1]``), drawn without
    replacement from ``softmax(bias[dataset[t]] + latent[t] @ gate)`` with the float64
    ``uniforms[t]``; the first draw (the largest Gumbel-perturbed score) goes in the last slot,
    so slots ascend by perturbed score. float32 ``latent`` [tokens, dim], ``gate`` [dim, e],
    ``bias`` [datasets, e]."""
    tokens, dim = latent.shape
    e, k = gate.shape[1], out.shape[1]
    width = (e + BLOCKS - 1) // BLOCKS * BLOCKS
    gone = np.float32(-np.inf)
    logit = np.full(width, gone, dtype=np.float32)  # padding: never drawn
    weight = np.zeros(width, dtype=np.float32)
    scale = np.empty(width, dtype=np.int32)
    prefix = np.zeros(BLOCKS, dtype=np.float64)
    lanes = np.empty(BLOCKS, dtype=np.float32)
    for t in range(tokens):
        row_bias = bias[dataset[t]]
        for c in range(e):
            logit[c] = row_bias[c]
        for d in range(dim):
            x = latent[t, d]
            for c in range(e):
                logit[c] += x * gate[d, c]
        exp_shifted(logit, lane_max(logit, lanes), e, weight, scale)
        block_prefix(weight, prefix)
        for j in range(k):
            c = draw_one(weight, prefix, uniforms[t, j]) if prefix[BLOCKS - 1] > 0.0 else -1
            if c < 0:  # rounding, or the rest underflowed against the first max: rescale
                exp_shifted(logit, lane_max(logit, lanes), e, weight, scale)
                block_prefix(weight, prefix)
                c = draw_one(weight, prefix, uniforms[t, j])
            if c < 0:  # the target sits in the last ulp: the last expert with weight
                c = last_positive(weight)
            out[t, k - 1 - j] = c
            # Subtracted, not re-summed: a residue left by rounding only sends a draw to
            # the rescale above.
            w = weight[c]
            for i in range(c % BLOCKS, BLOCKS):
                prefix[i] -= w
            weight[c] = 0.0
            logit[c] = gone


@numba.njit(cache=True, nogil=True)
def last_positive(weight: np.ndarray) -> int:
    """The highest-numbered expert with weight (reached only through rounding)."""
    for c in range(weight.size - 1, -1, -1):
        if weight[c] > 0.0:
            return c
    return -1


@numba.njit(cache=True, nogil=True)
def ar1_mix(state: np.ndarray, noise: np.ndarray, scale: float, rho: np.float32) -> None:
    """``routing.ar1_update`` after its normal draw, in one pass over the flat float32 arrays:
    ``state = float32(float64(noise) * scale + float64(state * rho))`` with the state product
    in float32 and the sum in float64, each rounded as numpy's separate ufuncs round it."""
    for i in range(state.size):
        kept = state[i] * rho
        state[i] = np.float32(np.float64(noise[i]) * scale + np.float64(kept))


@numba.njit(cache=True, nogil=True)
def token_latents(
    req: np.ndarray, tok: np.ndarray, request: np.ndarray, w_req: np.float32,
    w_tok: np.float32, out: np.ndarray,
) -> None:
    """``routing.TokenLatents.mix``: ``w_req * req[request] + w_tok * tok`` in float32."""
    for t in range(tok.shape[0]):
        r = request[t]
        for d in range(tok.shape[1]):
            out[t, d] = w_req * req[r, d] + w_tok * tok[t, d]
