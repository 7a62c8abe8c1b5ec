"""The routing generator's hot loops (numba): the Gumbel-top-k keys and the latent states.

:func:`perturbed_keys` forms the perturbed scores (bias added, noise subtracted, each sum
rounded to float32) and ``sampling.top_k_ascending``'s sort keys in one pass over the block,
where numpy would make eight. The noise itself (uniforms drawn in bulk from the run's seeded
numpy Generator, then two logs) is numpy's. :func:`ar1_mix` and :func:`token_latents` are the
AR(1) latent step and the token mix in one pass each. tests/test_uniform_kernel.py compares
them with plain numpy forms. Compiled functions are cached on disk (``cache=True``, see
``startup.numba_module``).
"""

from __future__ import annotations

import numpy as np

from libra_des.base.startup import numba_module

numba = numba_module()

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
