"""The routing generator's kernels bit for bit: the AR(1) latent step and the token mix against
numpy, the expert draws against tests/reference/routing_draws.py (their law is tested
statistically in tests/test_routing_law.py)."""

from __future__ import annotations

import numpy as np
import pytest

from libra_des.config import RoutingSpec
from libra_des.workload.routing import RouterModel, TokenLatents
from libra_des.workload.uniform_kernel import route_tokens
from tests.reference.routing_draws import route_tokens as reference_draws
from tests.test_sampling import same_state


def numpy_ar1(state: np.ndarray, rho: float, rng: np.random.Generator) -> np.ndarray:
    """The AR(1) step as separate numpy ufuncs: float64 normals, float32 product, float64 sum,
    one rounding."""
    noise = rng.standard_normal(state.shape)
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


def kernel_inputs(seed: int, tokens: int, dim: int, experts: int, k: int, sharpness: float
                  ) -> tuple[np.ndarray, ...]:
    """Random latents, gate, per-dataset bias (logits of spread ``sharpness``) and uniforms."""
    rng = np.random.default_rng(seed)
    latent = rng.standard_normal((tokens, dim), dtype=np.float32)
    gate = (sharpness * rng.standard_normal((dim, experts))).astype(np.float32)
    bias = (sharpness * rng.standard_normal((3, experts))).astype(np.float32)
    dataset = rng.integers(0, 3, tokens).astype(np.int16)
    return latent, gate, bias, dataset, rng.random((tokens, k))


@pytest.mark.parametrize(("dim", "experts", "k", "sharpness"), [
    (8, 128, 8, 1.5),  # the shipped shape
    (8, 128, 8, 30.0),  # sharp: later picks underflow against the first maximum (rescales)
    (3, 257, 8, 5.0),  # experts not a whole number of blocks
    (8, 16, 16, 200.0),  # every expert drawn, almost all weights underflowed
    (1, 7, 7, 3.0),  # fewer experts than one block
    (8, 64, 4, 0.0),  # uniform logits: ties everywhere
])
def test_route_tokens_match_the_reference(dim: int, experts: int, k: int,
                                          sharpness: float) -> None:
    """The compiled draws (vector steps included) give the reference's experts bit for bit,
    written into a strided slice as the generator writes them."""
    inputs = kernel_inputs(experts + k, 600, dim, experts, k, sharpness)
    out = np.full((600, 3, k), -7, dtype=np.int16)
    route_tokens(*inputs, out[:, 1, :])
    assert np.array_equal(out[:, 1, :], reference_draws(*inputs))
    assert np.all(out[:, [0, 2], :] == -7)


def test_route_tokens_rescale_after_underflow() -> None:
    """One dominant expert: every other weight underflows against it, so the second pick
    goes through the rescale (the rest then weighed against expert 17), and still matches
    the reference."""
    latent = np.zeros((50, 1), dtype=np.float32)
    gate = np.zeros((1, 40), dtype=np.float32)
    bias = np.full((1, 40), -120.0, dtype=np.float32)
    bias[0, 5], bias[0, 17] = 0.0, -95.0
    inputs = (latent, gate, bias, np.zeros(50, dtype=np.int16),
              np.random.default_rng(3).random((50, 4)))
    out = np.empty((50, 4), dtype=np.int16)
    route_tokens(*inputs, out)
    assert np.array_equal(out, reference_draws(*inputs))
    assert np.all(out[:, 3] == 5) and np.all(out[:, 2] == 17)
