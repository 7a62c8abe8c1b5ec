"""Fast exact paths of the routing generator and predictors equal their plain numpy definitions
(the routing law itself is tested statistically in tests/test_routing_law.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from libra_des.workload.routing import (
    LATENT_DIM,
    ar1_step,
)
from libra_des.workload.sampling import (
    BLAS_SINGLE_THREAD,
    thin_matmul,
    top_k_ascending,
)


def same_state(a: np.random.Generator, b: np.random.Generator) -> bool:
    """Both generators produce the same next draws (uint32 halves and 64-bit words)."""
    return bool(np.array_equal(a.random(5, dtype=np.float32), b.random(5, dtype=np.float32))
                and np.array_equal(a.random(3), b.random(3)))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 12), st.sampled_from(["spread", "tied", "near"]))
def test_top_k_ascending_is_the_ordered_top_k(seed: int, k: int, values: str) -> None:
    rng = np.random.default_rng(seed)
    scores = rng.standard_normal((300, 16)).astype(np.float32)
    if values != "spread":  # few distinct values: many ties, decided by argpartition
        scores = np.round(scores * 2).astype(np.float32)
    if values == "near":  # ...or nudged a few units in the last place apart: no ties
        scores = (scores.view(np.int32) + rng.integers(0, 4, scores.shape, dtype=np.int32)
                  ).view(np.float32)
    got = top_k_ascending(scores, k)
    e = scores.shape[1]
    tail = np.sort(scores, axis=1)[:, e - k - 1 :]
    tied = (tail[:, 1:] == tail[:, :-1]).any(axis=1)
    # Rows without ties: exactly the stable argsort's top k (unique answer).
    assert np.array_equal(got[~tied], np.argsort(scores, axis=1, kind="stable")[~tied, e - k :])
    # Rows with ties: argpartition's own answer.
    assert np.array_equal(got[tied], np.argpartition(scores[tied], e - k, axis=1)[:, e - k :])


def plain_ar1(state: np.ndarray, rho: float, rng: np.random.Generator) -> np.ndarray:
    noise = rng.standard_normal(state.shape)
    return np.asarray(rho * state + np.sqrt(1.0 - rho * rho) * noise, dtype=np.float32)


def test_ar1_step_is_the_plain_formula() -> None:
    state = np.random.default_rng(0).standard_normal((50, LATENT_DIM), dtype=np.float32)
    fast, plain = np.random.default_rng(4), np.random.default_rng(4)
    assert np.array_equal(ar1_step(state, 0.8, fast), plain_ar1(state, 0.8, plain))


@pytest.mark.parametrize("rows", [0, 1, 255, 256, 1000])
def test_thin_matmul_equals_one_product(rows: int) -> None:
    rng = np.random.default_rng(rows)
    a = rng.standard_normal((rows, LATENT_DIM), dtype=np.float32)
    b = rng.standard_normal((LATENT_DIM, 128), dtype=np.float32)
    out = np.empty((rows, 128), dtype=np.float32)
    got = thin_matmul(a, b, out)
    block = max(1, BLAS_SINGLE_THREAD // (LATENT_DIM * 128))
    by_block = [a[lo:lo + block] @ b for lo in range(0, rows, block)]
    assert np.array_equal(got, np.concatenate(by_block) if by_block else a @ b)
    # One large product may round differently where BLAS threads split it (docstring).
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)
