"""The routing generator's kernels against numpy, bit for bit: the perturbed scores and top-k
keys, the AR(1) latent step and the token mix, and whole traces against the plain
definition."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from libra_des.config import RoutingSpec
from libra_des.workload.routing import RouterModel, TokenLatents, generate_trace
from libra_des.workload.sampling import Scratch, gumbel_top_k_of, top_k_ascending
from tests.test_sampling import reference_trace, same_state


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 15), st.sampled_from(["spread", "tied"]))
def test_gumbel_top_k_is_the_reference(seed: int, k: int, values: str) -> None:
    rng = np.random.default_rng(seed)
    rows, e = 200, 16
    scores = rng.standard_normal((rows, e)).astype(np.float32)
    bias = rng.standard_normal((3, e)).astype(np.float32)
    noise = rng.standard_normal((rows, e)).astype(np.float32)
    if values == "tied":  # few distinct values: ties that argpartition must decide
        scores, bias, noise = (np.round(a * 2).astype(np.float32) for a in (scores, bias, noise))
    noise[0, 0] = np.inf  # a uniform of 0: its score is -inf, never picked
    dataset = rng.integers(0, 3, rows).astype(np.int16)
    want_scores = scores + bias[dataset]
    want_scores -= noise
    want = top_k_ascending(want_scores, k)
    got_scores = scores.copy()
    got = gumbel_top_k_of(got_scores, bias, dataset, noise, k, Scratch.of(rows, e))
    assert np.array_equal(got_scores.view(np.int32), want_scores.view(np.int32))
    assert np.array_equal(got, want)


@pytest.mark.parametrize("experts,top_k", [(64, 8), (20, 19), (6, 6)])
def test_trace_is_the_plain_definition(experts: int, top_k: int) -> None:
    router = RouterModel.build("qwen3-235b-a22b", experts, 3, top_k, RoutingSpec(skew=1.5))
    lengths = np.array([700, 1, 1900, 1500])  # chunks cross requests
    datasets = np.array([0, 3, 7, 2], dtype=np.int16)
    fast, plain = np.random.default_rng(9), np.random.default_rng(9)
    got = generate_trace(router, lengths, datasets, fast)
    want = reference_trace(router, lengths, datasets.astype(np.int64), plain)
    assert np.array_equal(np.sort(got.experts, axis=2), np.sort(want, axis=2))
    assert same_state(fast, plain)


def numpy_ar1(state: np.ndarray, rho: float, rng: np.random.Generator) -> np.ndarray:
    """The AR(1) step as separate numpy ufuncs: float32 product, float64 sum, one rounding."""
    noise = rng.standard_normal(state.shape, dtype=np.float32)
    wide = noise * np.sqrt(1.0 - rho * rho)
    return np.asarray(wide + state * np.float32(rho), dtype=np.float32)


@pytest.mark.parametrize("rho", [0.0, 0.3, 0.8, 0.999])
def test_latent_steps_are_numpys(rho: float) -> None:
    """The AR(1) step and the token mix give numpy's floats bit for bit (the trace test
    compares experts only, which a last-bit difference might not change)."""
    router = RouterModel.build("qwen3-235b-a22b", 16, 2, 4, RoutingSpec(layer_correlation=rho))
    latents = TokenLatents.of(router, np.array([300, 1, 77]))
    plain_rng, fast_rng = np.random.default_rng(4), np.random.default_rng(4)
    fast = latents.initial(fast_rng)
    req = plain_rng.standard_normal(fast.req.shape, dtype=np.float32)
    tok = plain_rng.standard_normal(fast.tok.shape, dtype=np.float32)
    w_req, w_tok = latents.weights
    for _ in range(3):
        req, tok = numpy_ar1(req, rho, plain_rng), numpy_ar1(tok, rho, plain_rng)
        fast.step(rho, fast_rng)
        mixed = np.asarray(w_req * req[latents.request] + w_tok * tok)
        for a, b in ((req, fast.req), (tok, fast.tok), (mixed, latents.mix(fast))):
            assert a.dtype == b.dtype == np.float32
            assert np.array_equal(a.view(np.int32), b.view(np.int32))
    assert same_state(plain_rng, fast_rng)
