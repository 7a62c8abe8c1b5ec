"""The routing generator's latent kernels against numpy, bit for bit: the AR(1) latent step and
the token mix (the expert draws are tested statistically in tests/test_routing_law.py)."""

from __future__ import annotations

import numpy as np
import pytest

from libra_des.config import RoutingSpec
from libra_des.workload.routing import RouterModel, TokenLatents
from tests.test_sampling import same_state


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
