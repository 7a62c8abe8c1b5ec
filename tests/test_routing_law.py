"""The routing draws follow Gumbel-top-k's law (sampling without replacement from the softmax),
tested statistically with fixed seeds, each at significance ``ALPHA``: the draws are not any
particular random stream, so no test compares them bit for bit.

* the first pick is the softmax (chi-square goodness of fit);
* ordered pairs follow Plackett-Luce, ``p_i p_j / (1 - p_i)`` (chi-square);
* a draw past float32 underflow still follows the softmax of the rest (the rescale path);
* per-expert marginal loads of the full generator (skewed popularity, 128 experts, top 8)
  match a plain numpy Gumbel-top-k on the same logits (chi-square homogeneity; inclusions
  within a token are negatively correlated, which makes this test conservative), and the
  skew of what is picked (the summed logits of a token's experts) has the same law (two-sample
  Kolmogorov-Smirnov, and the mean within 4 standard errors).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from libra_des.base.kernel import kernel
from libra_des.config import RoutingSpec
from libra_des.workload.routing import RouterModel, TokenLatents, generate_trace
from libra_des.workload.uniform_kernel import EXP_FLOOR, route_tokens, weigh_row

#: Significance of every test here (with fixed seeds each either passes or fails for good).
ALPHA = 1e-3


def draw(logits: np.ndarray, k: int, tokens: int, seed: int) -> np.ndarray:
    """``[tokens, k]`` draws from fixed ``logits`` (no latent part), slots as the kernel
    writes them (the first pick last)."""
    e = logits.size
    latent = np.zeros((tokens, 1), dtype=np.float32)
    gate = np.zeros((1, e), dtype=np.float32)
    bias = logits.astype(np.float32)[None, :]
    out = np.empty((tokens, k), dtype=np.int16)
    uniforms = np.random.default_rng(seed).random((tokens, k))
    route_tokens(latent, gate, bias, np.zeros(tokens, dtype=np.int16), uniforms, out)
    return out


def softmax(logits: np.ndarray) -> np.ndarray:
    w = np.exp(logits - logits.max())
    return np.asarray(w / w.sum())


def test_first_pick_is_the_softmax() -> None:
    logits = np.array([2.0, 0.0, -1.0, 1.5, -3.0, 0.5, 0.1, -0.4, 3.0, -6.0])
    picks = draw(logits, 1, 200_000, seed=1)[:, 0]
    counts = np.bincount(picks, minlength=logits.size)
    expected = softmax(logits) * picks.size
    assert stats.chisquare(counts, expected).pvalue > ALPHA


def test_ordered_pairs_follow_plackett_luce() -> None:
    logits = np.array([1.0, 0.2, -0.5, 2.0, 0.0, -1.5])
    e, p = logits.size, softmax(logits)
    out = draw(logits, 2, 200_000, seed=2)
    first, second = out[:, 1].astype(np.int64), out[:, 0].astype(np.int64)
    assert np.all(first != second)
    counts = np.bincount(first * e + second, minlength=e * e).reshape(e, e)
    want = p[:, None] * p[None, :] / (1.0 - p[:, None]) * out.shape[0]
    off = ~np.eye(e, dtype=bool)
    assert counts[~off].sum() == 0
    assert stats.chisquare(counts[off], want[off]).pvalue > ALPHA


def test_draws_past_underflow_follow_the_rest() -> None:
    """After the dominant expert, the rest weigh exp(-200) against it (0 in float32): the
    kernel rescales and draws them from their own softmax."""
    logits = np.array([0.0, -200.0, -201.0, -199.5])
    out = draw(logits, 4, 50_000, seed=3)
    assert np.all(out[:, 3] == 0)
    assert np.all(np.sort(out, axis=1) == np.arange(4))
    counts = np.bincount(out[:, 2], minlength=4)[1:]
    assert stats.chisquare(counts, softmax(logits[1:]) * out.shape[0]).pvalue > ALPHA


@kernel
def weigh_first_row(logit: np.ndarray, weight: np.ndarray, sums: np.ndarray) -> None:
    weigh_row(logit, 0, weight, sums)


def test_exp_is_within_a_few_ulp() -> None:
    x = np.linspace(float(EXP_FLOOR), 0.0, 100_003).astype(np.float32)
    logit = np.concatenate([x, np.full(-x.size % 16, -np.inf, dtype=np.float32)])[None, :]
    weight = np.full_like(logit, np.nan)
    sums = np.zeros((1, 16))
    weigh_first_row(logit, weight, sums)
    want = np.exp(x.astype(np.float64))
    assert np.max(np.abs(weight[0, : x.size] / want - 1.0)) < 4 * np.finfo(np.float32).eps
    assert np.all(weight[0, x.size:] == 0.0)
    blocks = np.add.accumulate(weight[0].reshape(-1, 16).astype(np.float64), axis=0)[-1]
    assert np.array_equal(sums[0], blocks)


def gumbel_top_k(logits: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """The plain definition: the ``k`` largest of logits plus Gumbel noise."""
    noisy = logits + rng.gumbel(size=logits.shape)
    return np.asarray(np.argsort(-noisy, axis=1)[:, :k])


@pytest.mark.parametrize("skew", [0.5, 1.5])
def test_generator_matches_gumbel_top_k(skew: float) -> None:
    experts, k, tokens = 128, 8, 20_000
    router = RouterModel.build("qwen3-235b-a22b", experts, 1, k, RoutingSpec(skew=skew))
    lengths = np.full(tokens // 500, 500)
    datasets = np.arange(lengths.size, dtype=np.int16) % 8
    got = generate_trace(router, lengths, datasets, np.random.default_rng(11)).experts[:, 0]
    # The same logits (the generator's first draws are the latent states), other noise.
    latents = TokenLatents.of(router, lengths)
    mixed = latents.mix(latents.initial(np.random.default_rng(11))).astype(np.float64)
    logits = (router.bias[:, 0][datasets[latents.request]]
              + mixed @ (router.sharpness * router.gate[0].astype(np.float64)))
    want = gumbel_top_k(logits, k, np.random.default_rng(12))
    loads = np.stack([np.bincount(a.ravel(), minlength=experts) for a in (got, want)])
    seen = loads.sum(axis=0) > 0
    assert stats.chi2_contingency(loads[:, seen]).pvalue > ALPHA
    picked = [np.take_along_axis(logits, a.astype(np.int64), axis=1).sum(axis=1)
              for a in (got, want)]
    assert stats.ks_2samp(*picked).pvalue > ALPHA
    gap = picked[0].mean() - picked[1].mean()
    assert abs(gap) < 4 * np.sqrt((picked[0].var() + picked[1].var()) / tokens)
