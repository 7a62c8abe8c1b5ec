"""Compiled (numba) kernels of the routing generator's Gumbel-top-k, bit for bit.

:func:`fill_uniform` draws numpy's float32 uniforms of a PCG64 stream. numpy's float32
uniform is ``(w >> 8) * 2**-24`` for the next 32-bit half ``w`` of PCG64's 64-bit outputs
(low half first, the other half kept pending for the next draw). The kernel runs PCG64's
128-bit LCG itself (numpy's multiplier, XSL-RR output) on two 64-bit halves and writes the
same floats as ``rng.random(dtype=np.float32, out=...)`` at about half its cost (no call
through a function pointer per value); ``sampling.uniform_f32`` puts the stream's state back
into the generator afterwards, so later draws (of any kind) are unchanged.

:func:`perturbed_keys` forms the perturbed scores (bias added, noise subtracted, each sum
rounded to float32 as numpy's in-place ops round it) and ``sampling.top_k_ascending``'s sort
keys in one pass over the block, where numpy makes eight. The noise's logs stay numpy's
(its SIMD log is both fast and the reference's exact values).

``sampling.compiled_stream`` decides when they are used (large traces only: loading numba
costs more than it saves on a small one); tests/test_uniform_kernel.py compares both paths.

Like ``plan/tap_kernel.py``, this module is imported lazily (numba's import is costly) and its
compiled functions are cached on disk (``cache=True``).
"""

from __future__ import annotations

import numba
import numpy as np

#: PCG64's 128-bit LCG multiplier (numpy's PCG64 default multiplier), as two 64-bit halves.
MULT_HI = np.uint64(2549297995355413924)
MULT_LO = np.uint64(4865540595714422341)
MASK32 = np.uint64(0xFFFFFFFF)
#: numpy's float32 uniform: a 32-bit half's top 24 bits times 2**-24.
UNIT = np.float32(1.0 / (1 << 24))


@numba.njit(cache=True, nogil=True)
def mul_hi(a: np.uint64, b: np.uint64) -> np.uint64:
    """High 64 bits of the 128-bit product ``a * b`` (from 32-bit partial products)."""
    s32 = np.uint64(32)
    a0, a1 = a & MASK32, a >> s32
    b0, b1 = b & MASK32, b >> s32
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> s32) + (p10 & MASK32) + (p01 & MASK32)
    return p11 + (p10 >> s32) + (p01 >> s32) + (mid >> s32)


@numba.njit(cache=True, nogil=True)
def fill_uniform(state: np.ndarray, out: np.ndarray) -> None:
    """Fill float32 ``out`` (1-D) with the stream's next uniforms; ``state`` uint64 [6]
    (LCG state hi, lo, increment hi, lo, pending-half flag, pending half) is updated."""
    s_hi, s_lo, i_hi, i_lo = state[0], state[1], state[2], state[3]
    pending, half = state[4], state[5]
    shift = np.uint64(8)
    for i in range(out.size):
        if pending:
            word = half
            pending = np.uint64(0)
        else:  # state = state * MULT + inc (mod 2**128), then XSL-RR of the new state
            lo = s_lo * MULT_LO
            hi = mul_hi(s_lo, MULT_LO) + s_lo * MULT_HI + s_hi * MULT_LO
            new_lo = lo + i_lo
            s_hi = hi + i_hi + (np.uint64(1) if new_lo < lo else np.uint64(0))
            s_lo = new_lo
            x = s_hi ^ s_lo
            rot = s_hi >> np.uint64(58)
            full = (x >> rot) | (x << ((np.uint64(64) - rot) & np.uint64(63)))
            word = full & MASK32
            half = full >> np.uint64(32)
            pending = np.uint64(1)
        out[i] = np.float32(np.uint32(word >> shift)) * UNIT
    state[0], state[1], state[4], state[5] = s_hi, s_lo, pending, half


@numba.njit(cache=True, nogil=True)
def perturbed_keys(
    scores: np.ndarray, bias: np.ndarray, dataset: np.ndarray, noise: np.ndarray, shift: int,
    keys: np.ndarray,
) -> None:
    """``scores = (scores + bias[dataset[row]]) - noise`` in float32 (numpy's two roundings),
    in place, and ``keys`` = ``sampling.top_k_ascending``'s int32 sort keys of the result:
    the order-preserving bits with the low ``shift`` bits replaced by the column."""
    rows, e = scores.shape
    bits = scores.view(np.int32)
    low = np.int32((1 << shift) - 1)
    for r in range(rows):
        row_bias = bias[dataset[r]]
        for c in range(e):
            scores[r, c] = (scores[r, c] + row_bias[c]) - noise[r, c]
            b = bits[r, c]
            sign = b >> 31
            ordered = ((b & np.int32(0x7FFFFFFF)) ^ sign) - sign
            keys[r, c] = (ordered & ~low) | np.int32(c)


@numba.njit(cache=True, nogil=True)
def sorted_tail(keys: np.ndarray, k: int, shift: int, out: np.ndarray) -> np.ndarray:
    """``sampling.top_k_of_keys`` after the sort, in one pass: ``out[r]`` = the columns of the
    ``k`` largest of row-sorted int32 ``keys[r]`` (ascending); returns the rows whose ``k + 1``
    largest keys share their score bits (``exact_top_k`` redoes those)."""
    rows, e = keys.shape
    low = np.int32((1 << shift) - 1)
    unsure = np.empty(rows, dtype=np.int64)
    count = 0
    for r in range(rows):
        tied = False
        for j in range(k):
            a, b = keys[r, e - k - 1 + j], keys[r, e - k + j]
            out[r, j] = b & low
            tied = tied or (a >> shift) == (b >> shift)
        if tied:
            unsure[count] = r
            count += 1
    return unsure[:count]


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
