"""Fast exact sampling paths of the routing generator equal their plain numpy definitions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from libra_des.config import RoutingSpec
from libra_des.workload.routing import (
    CHUNK,
    LATENT_DIM,
    RouterModel,
    ar1_step,
    generate_trace,
    request_datasets,
    skip_trace,
)
from libra_des.workload.sampling import skip_uniform_f32, thin_matmul, top_k_ascending


def same_state(a: np.random.Generator, b: np.random.Generator) -> bool:
    """Both generators produce the same next draws (uint32 halves and 64-bit words)."""
    return bool(np.array_equal(a.random(5, dtype=np.float32), b.random(5, dtype=np.float32))
                and np.array_equal(a.random(3), b.random(3)))


@pytest.mark.parametrize("pending", [False, True])
@pytest.mark.parametrize("count", [0, 1, 2, 7, 1000])
def test_skip_uniform_f32_lands_where_drawing_does(pending: bool, count: int) -> None:
    skipped, drawn = np.random.default_rng(5), np.random.default_rng(5)
    if pending:
        skipped.random(dtype=np.float32)
        drawn.random(dtype=np.float32)
    skip_uniform_f32(skipped, count)
    drawn.random(count, dtype=np.float32)
    assert same_state(skipped, drawn)


def test_skip_uniform_f32_other_bit_generators_draw() -> None:
    skipped, drawn = np.random.Generator(np.random.Philox(3)), np.random.Generator(
        np.random.Philox(3))
    skip_uniform_f32(skipped, 9)
    drawn.random(9, dtype=np.float32)
    assert same_state(skipped, drawn)


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
    noise = rng.standard_normal(state.shape, dtype=np.float32)
    return np.asarray(rho * state + np.sqrt(1.0 - rho * rho) * noise, dtype=np.float32)


def test_ar1_step_is_the_plain_formula() -> None:
    state = np.random.default_rng(0).standard_normal((50, LATENT_DIM), dtype=np.float32)
    fast, plain = np.random.default_rng(4), np.random.default_rng(4)
    assert np.array_equal(ar1_step(state, 0.8, fast), plain_ar1(state, 0.8, plain))


def reference_trace(
    router: RouterModel, lengths: np.ndarray, datasets: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """The generator written plainly: per-chunk scores, Gumbel noise, argpartition."""
    request = np.repeat(np.arange(lengths.size), lengths)
    tok_dataset = datasets[request]
    share = router.request_share
    w_req, w_tok = np.float32(np.sqrt(share)), np.float32(np.sqrt(1.0 - share))
    req = rng.standard_normal((lengths.size, LATENT_DIM), dtype=np.float32)
    tok = rng.standard_normal((request.size, LATENT_DIM), dtype=np.float32)
    layers, _, e = router.gate.shape
    kth = e - router.top_k
    out = np.empty((request.size, layers, router.top_k), dtype=np.int64)
    for layer in range(layers):
        if layer:
            req, tok = plain_ar1(req, router.layer_correlation, rng), plain_ar1(
                tok, router.layer_correlation, rng)
        gate = np.float32(router.sharpness) * router.gate[layer]
        for lo in range(0, request.size, CHUNK):
            hi = min(lo + CHUNK, request.size)
            latent = w_req * req[request[lo:hi]] + w_tok * tok[lo:hi]
            scores = router.bias[:, layer][tok_dataset[lo:hi]] + latent @ gate
            with np.errstate(divide="ignore"):
                scores -= np.log(-np.log(rng.random(scores.shape, dtype=np.float32)))
            out[lo:hi, layer] = np.argpartition(scores, kth, axis=1)[:, kth:]
    return out


def test_generator_matches_the_plain_definition() -> None:
    router = RouterModel.build("qwen3-235b-a22b", 64, 3, 4, RoutingSpec(dataset="mixed"))
    lengths = np.array([700, 0, 1900, 1500])  # chunks cross requests; one empty request
    fast, plain = np.random.default_rng(8), np.random.default_rng(8)
    datasets = request_datasets("mixed", lengths.size, 0, lengths.size, fast)
    plain.random(lengths.size)  # the same dataset draw
    got = generate_trace(router, lengths, datasets, fast).experts
    want = reference_trace(router, lengths, datasets.astype(np.int64), plain)
    # The same experts per token and layer (argpartition's slot order is build-specific).
    assert np.array_equal(np.sort(got, axis=2), np.sort(want, axis=2))
    assert same_state(fast, plain)


def test_skip_trace_lands_where_generating_does() -> None:
    router = RouterModel.build("qwen3-235b-a22b", 32, 4, 4, RoutingSpec())
    lengths = np.array([300, 257])
    skipped, drawn = np.random.default_rng(2), np.random.default_rng(2)
    skip_trace(router, lengths, skipped)
    generate_trace(router, lengths, np.zeros(lengths.size, dtype=np.int16), drawn)
    assert same_state(skipped, drawn)


@pytest.mark.parametrize("rows", [0, 1, 255, 256, 1000])
def test_thin_matmul_equals_one_product(rows: int) -> None:
    rng = np.random.default_rng(rows)
    a = rng.standard_normal((rows, LATENT_DIM), dtype=np.float32)
    b = rng.standard_normal((LATENT_DIM, 128), dtype=np.float32)
    out = np.empty((rows, 128), dtype=np.float32)
    assert np.array_equal(thin_matmul(a, b, out), a @ b)
