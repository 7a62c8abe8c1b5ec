"""A corpus length law: the quantile function of a real corpus, log-linear between knots.

Model assumptions:

* The law is given by knots ``(p_i, q_i)``: ``p_0 = 0 < p_1 < ... < p_K = 1`` and positive,
  non-decreasing lengths ``q_i`` (the corpus's shortest and longest documents at the ends).
  Between two knots ``ln l`` is linear in the probability, so the law is continuous, has no
  mass outside ``[q_0, q_K]`` and is exact at every knot. Sampling is by inverse CDF (one
  uniform per sample), then the same rounding, ``min`` and ``max`` as every length law.
* Knots (:func:`fit_knots`) sit every ``1/body_knots`` of probability up to the 99th
  percentile, and then on a geometric grid of the survival ``1 - p`` (``tail_per_decade``
  knots per decade) down to one document, so the heavy tail that sets Σ l² (attention cost)
  is followed document by document where the corpus is thin.
* Goodness of fit is the Kolmogorov-Smirnov distance between the law and the corpus
  (:func:`ks_distance`); ``docs/workloads.md`` states it for the shipped corpora.

Moments are closed form: on a segment where ``l(u) = exp(a + b u)``, ``∫ l^k du`` is
``exp(k a) (exp(k b Δ) - 1) / (k b)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from libra_des.errors import InputError
from libra_des.workload.normal import ndtri

FIELD = "workload.lengths.knots"


@dataclass(frozen=True)
class QuantileLaw:
    """Knots ``probs`` (0 .. 1, increasing) and ``lengths`` (positive, non-decreasing)."""

    probs: np.ndarray
    lengths: np.ndarray

    @classmethod
    def of(cls, knots: tuple[tuple[float, float], ...] | list[list[float]]) -> QuantileLaw:
        """The law of ``[[p, length], ...]`` knots; malformed knots are bad input."""
        arr = np.asarray(knots, dtype=np.float64)
        if arr.ndim != 2 or arr.shape[1] != 2 or arr.shape[0] < 2:
            raise InputError(FIELD, f"{arr.shape[0] if arr.ndim else 0} knots",
                             ">= 2 [probability, length] pairs")
        probs, lengths = arr[:, 0], arr[:, 1]
        if not (np.all(np.isfinite(arr)) and probs[0] == 0.0 and probs[-1] == 1.0
                and np.all(np.diff(probs) > 0)):
            raise InputError(FIELD, "probabilities", "strictly increasing from 0 to 1")
        if not (lengths[0] > 0 and np.all(np.diff(lengths) >= 0)):
            raise InputError(FIELD, "lengths", "positive and non-decreasing")
        return cls(probs, lengths)

    def quantile(self, u: np.ndarray) -> np.ndarray:
        """Inverse CDF at probabilities ``u`` in [0, 1]."""
        result: np.ndarray = np.exp(np.interp(u, self.probs, np.log(self.lengths)))
        return result

    def cdf(self, x: np.ndarray) -> np.ndarray:
        """P(L <= x) of the continuous law (0 below the first knot, 1 above the last)."""
        logs = np.log(self.lengths)
        # Flat segments (repeated lengths) hold no mass at a point: take the upper knot.
        keep = np.append(np.diff(logs) > 0, True)
        result: np.ndarray = np.interp(np.log(np.maximum(x, 1e-300)), logs[keep],
                                       self.probs[keep], left=0.0, right=1.0)
        return result

    def clipped_moment(self, k: int, cap: float = math.inf) -> float:
        """E[min(L, cap)^k] in closed form."""
        total = 0.0
        for p0, p1, q0, q1 in zip(self.probs[:-1], self.probs[1:], self.lengths[:-1],
                                  self.lengths[1:], strict=True):
            total += segment_moment(p0, p1, q0, q1, k, cap)
        return total


def segment_moment(p0: float, p1: float, q0: float, q1: float, k: int, cap: float) -> float:
    """∫ min(l(u), cap)^k du over one log-linear segment from (p0, q0) to (p1, q1)."""
    if q0 >= cap:
        return (p1 - p0) * cap**k
    if q1 > cap:  # split where l(u) reaches the cap
        split = p0 + (p1 - p0) * math.log(cap / q0) / math.log(q1 / q0)
        return segment_moment(p0, split, q0, cap, k, math.inf) + (p1 - split) * cap**k
    width = p1 - p0
    slope = k * math.log(q1 / q0)  # d(k ln l) over the whole segment
    if abs(slope) < 1e-12:
        return width * q0**k
    return width * q0**k * math.expm1(slope) / slope


def knot_probs(n: int, body_knots: int = 128, tail_per_decade: int = 8) -> np.ndarray:
    """Knot probabilities for a corpus of ``n`` documents (see the module docstring)."""
    if n < 100:
        raise InputError("corpus", f"{n} documents", ">= 100 documents to fit a law")
    body = np.arange(0, math.floor(0.99 * body_knots) + 1) / body_knots
    decades = math.log10(0.01 * n)  # from survival 1% down to one document
    steps = max(1, math.ceil(decades * tail_per_decade))
    survival = 0.01 * 10.0 ** (-decades * np.arange(0, steps + 1) / steps)
    probs = np.concatenate([body, 1.0 - survival, [1.0]])
    return np.unique(np.round(probs, 12))


def fit_knots(lengths: np.ndarray, body_knots: int = 128,
              tail_per_decade: int = 8) -> list[list[float]]:
    """The knots of a corpus: its empirical quantiles at :func:`knot_probs` (lengths to 0.1)."""
    data = np.sort(np.asarray(lengths, dtype=np.float64))
    if data.size == 0 or not np.all(np.isfinite(data)) or data[0] <= 0:
        raise InputError("corpus", "lengths", "a non-empty list of positive finite lengths")
    probs = knot_probs(data.size, body_knots, tail_per_decade)
    quants = np.maximum.accumulate(np.round(np.quantile(data, probs), 1))
    return [[float(p), float(q)] for p, q in zip(probs, quants, strict=True)]


def ks_distance(law: QuantileLaw, data: np.ndarray) -> float:
    """sup |F_law - F_data| over the corpus, lengths rounded to whole tokens as sampled.

    The sampler rounds to the nearest token, so the law's mass at token ``t`` is
    ``F(t + 1/2) - F(t - 1/2)``; the distance compares the two step functions at every token
    the corpus holds (their only jumps that can be largest).
    """
    values, counts = np.unique(np.rint(np.asarray(data, dtype=np.float64)), return_counts=True)
    empirical = np.cumsum(counts) / counts.sum()
    model = law.cdf(values + 0.5)
    before = np.concatenate([[0.0], empirical[:-1]])
    model_before = law.cdf(values - 0.5)
    return float(max(np.max(np.abs(model - empirical)), np.max(np.abs(model_before - before))))


def ks_critical(n: int, alpha: float = 0.05) -> float:
    """One-sample Kolmogorov-Smirnov critical distance for ``n`` points (asymptotic form)."""
    return math.sqrt(-0.5 * math.log(alpha / 2)) / math.sqrt(n)


def rescaled_tail_knots(median: float, p99: float, corpus: QuantileLaw,
                        body_knots: int = 128, split: float = 0.99) -> list[list[float]]:
    """Knots of a law with a published ``median`` and ``p99`` and a real corpus's tail shape.

    Only a corpus's median and 99th percentile are known (a paper's summary); the rest is
    assumed, and stated here:

    * Body, ``0 < p <= split``: the lognormal with that median and p99 (closed form: mu =
      ln median, sigma = ln(p99 / median) / Phi^-1(split)), at every ``1/body_knots`` of
      probability and at ``split``; the first knot (``p = 0``) is one token.
    * Tail, ``p > split``: ``corpus``'s own knots above ``split``, every length multiplied by
      ``p99 / corpus.quantile(split)``. The tail's ratios to its p99, hence its shape (its
      Pareto index, how far its longest document lies past p99), are the corpus's.

    Median and p99 are knots, so the law meets them exactly. Nothing constrains the longest
    length: it is the corpus's longest times the same factor (the caller's ``max`` clips it).
    Lengths are rounded to 0.1 token, as :func:`fit_knots` rounds.
    """
    if not 0 < median < p99:
        raise InputError("workload.lengths.p99", p99, f"> median={median} > 0")
    probs = np.append(np.arange(0, math.ceil(split * body_knots)) / body_knots, split)
    mu, sigma = math.log(median), math.log(p99 / median) / float(ndtri(split))
    body = np.exp(mu + sigma * ndtri(probs[1:]))
    scale = p99 / float(corpus.quantile(np.array([split]))[0])
    above = corpus.probs > split
    out_probs = np.concatenate([probs, corpus.probs[above]])
    lengths = np.concatenate([[1.0], body, corpus.lengths[above] * scale])
    lengths = np.maximum.accumulate(np.round(lengths, 1))
    return [[float(p), float(q)] for p, q in zip(out_probs, lengths, strict=True)]
