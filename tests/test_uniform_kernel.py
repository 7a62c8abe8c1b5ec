"""The compiled routing kernels against numpy, bit for bit: PCG64 float32 uniforms, the
perturbed scores and top-k keys, and whole generated traces (compiled or not)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from libra_des.config import RoutingSpec
from libra_des.workload.routing import RouterModel, TokenLatents, generate_trace
from libra_des.workload.sampling import (
    COMPILED_UNIFORMS,
    Scratch,
    compiled_gumbel_top_k,
    compiled_stream,
    top_k_ascending,
    uniform_f32,
)
from tests.test_sampling import same_state


@pytest.mark.parametrize("pending", [False, True])
@pytest.mark.parametrize("count", [0, 1, 2, 7, 4096])
def test_compiled_uniforms_are_numpys(pending: bool, count: int) -> None:
    compiled, drawn = np.random.default_rng(11), np.random.default_rng(11)
    if pending:  # a pending 32-bit half is the next draw
        compiled.random(dtype=np.float32)
        drawn.random(dtype=np.float32)
    got = uniform_f32(compiled, np.empty(count, dtype=np.float32), True)
    assert np.array_equal(got, drawn.random(count, dtype=np.float32))
    assert same_state(compiled, drawn)


def test_compiled_kernels_only_for_large_pcg64_jobs() -> None:
    assert compiled_stream(np.random.default_rng(0), COMPILED_UNIFORMS)
    assert not compiled_stream(np.random.default_rng(0), COMPILED_UNIFORMS - 1)
    assert not compiled_stream(np.random.Generator(np.random.Philox(0)), COMPILED_UNIFORMS)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 15), st.sampled_from(["spread", "tied"]))
def test_compiled_gumbel_top_k_is_the_reference(seed: int, k: int, values: str) -> None:
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
    got = compiled_gumbel_top_k(got_scores, bias, dataset, noise, k, Scratch.of(rows, e))
    assert np.array_equal(got_scores.view(np.int32), want_scores.view(np.int32))
    assert np.array_equal(got, want)


@pytest.mark.parametrize("experts,top_k", [(64, 8), (20, 19)])
def test_compiled_trace_is_the_numpy_trace(experts: int, top_k: int) -> None:
    router = RouterModel.build("qwen3-235b-a22b", experts, 3, top_k, RoutingSpec(skew=1.5))
    lengths = np.array([700, 1, 1900, 1500])  # chunks cross requests
    datasets = np.array([0, 3, 7, 2], dtype=np.int16)
    fast, plain = np.random.default_rng(9), np.random.default_rng(9)
    got = generate_trace(router, lengths, datasets, fast, compiled=True)
    want = generate_trace(router, lengths, datasets, plain, compiled=False)
    assert np.array_equal(got.experts, want.experts)
    assert same_state(fast, plain)


@pytest.mark.parametrize("rho", [0.0, 0.3, 0.8, 0.999])
def test_compiled_latent_steps_are_numpys(rho: float) -> None:
    """The AR(1) step and the token mix give numpy's floats bit for bit (the trace test
    compares experts only, which a last-bit difference might not change)."""
    router = RouterModel.build("qwen3-235b-a22b", 16, 2, 4, RoutingSpec(layer_correlation=rho))
    latents = TokenLatents.of(router, np.array([300, 1, 77]))
    plain_rng, fast_rng = np.random.default_rng(4), np.random.default_rng(4)
    plain, fast = latents.initial(plain_rng), latents.initial(fast_rng)
    for _ in range(3):
        plain.step(rho, plain_rng)
        fast.step(rho, fast_rng, compiled=True)
        for a, b in ((plain.req, fast.req), (plain.tok, fast.tok),
                     (latents.mix(plain), latents.mix(fast, compiled=True))):
            assert a.dtype == b.dtype == np.float32
            assert np.array_equal(a.view(np.int32), b.view(np.int32))
    assert same_state(plain_rng, fast_rng)
