"""Raw sample-length distributions (tokens per training sample), all seeded explicitly.

Model assumptions:

* ``lognormal_pareto``: a lognormal body whose median and 99th percentile are given (closed-form
  fit, :func:`fit_lognormal`), optionally *spliced* with a Pareto tail above ``tail_start``.
  The splice keeps a continuous CDF: ``tail_weight`` is the probability mass above
  ``tail_start`` and defaults to the body's own mass there, in which case every quantile below
  ``tail_start`` is exactly the body's (so median and p99 stay as fitted when
  ``tail_start > p99``). Samples are drawn by inverse CDF (one uniform per sample), rounded to
  whole tokens, raised to ``min`` and clipped at the hard ``max`` when one is set.
* ``empirical``: lengths resampled with replacement from a file (JSON list, text with one
  length per line, or ``.npy``).
* ``constant``: every sample has ``value`` tokens (``median`` when ``value`` is unset).
* ``mixture``: each sample picks a component with probability proportional to its weight.

Laws are looked up by ``workload.lengths.kind`` in :data:`REGISTRY`, never branched on: a law
is one :class:`LengthLaw` (name, sampler, moment, the fields it needs) and a :func:`register`
call; the shipped ones (:data:`SHIPPED`) are registered on the first look-up, then the entry
points of the group ``libra_des.length_laws``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from libra_des.config import LengthDist
from libra_des.config.validation import MAX_TOKENS
from libra_des.errors import InputError
from libra_des.registry import Registry, shipped_then_entry_points
from libra_des.workload.normal import ndtr, ndtri
from libra_des.workload.quantile_law import QuantileLaw

#: Standard-normal 99th percentile, Phi^-1(0.99), as :func:`ndtri` gives it (a test checks
#: the two agree; written out so that reading a length law compiles nothing).
Z99 = 2.3263478740408408
PATH_FIELD = "workload.lengths.path"

Sampler = Callable[[int, np.random.Generator], np.ndarray]


def fit_lognormal(median: float, p99: float) -> tuple[float, float]:
    """(mu, sigma) of the lognormal with the given median and 99th percentile (closed form)."""
    if median <= 0 or p99 <= median:
        raise InputError("workload.lengths.p99", p99, f"> median={median}")
    return math.log(median), math.log(p99 / median) / Z99


@dataclass(frozen=True)
class SplicedLognormal:
    """Lognormal body below ``tail_start``, Pareto(``alpha``) above it with mass ``weight``."""

    mu: float
    sigma: float
    tail_start: float = math.inf
    alpha: float = 1.0
    weight: float = 0.0

    @property
    def body_mass(self) -> float:
        """P(body < tail_start) of the unspliced lognormal."""
        if math.isinf(self.tail_start):
            return 1.0
        return float(ndtr((math.log(self.tail_start) - self.mu) / self.sigma))

    def quantile(self, u: np.ndarray) -> np.ndarray:
        """Inverse CDF of the spliced law at probabilities ``u`` in (0, 1)."""
        u = np.asarray(u, dtype=np.float64)
        body_share = 1.0 - self.weight
        # Body: rescale u so that [0, 1-w) maps onto the lognormal's [0, F(tail_start)).
        v = np.minimum(u / body_share, 1.0) * self.body_mass if body_share > 0 else u
        v = np.clip(v, 1e-300, 1.0 - 1e-16)
        out = np.exp(self.mu + self.sigma * ndtri(v))
        if self.weight > 0:
            tail = u >= body_share
            survival = (1.0 - u[tail]) / self.weight
            out[tail] = self.tail_start * np.maximum(survival, 1e-300) ** (-1.0 / self.alpha)
        return out

    def clipped_moment(self, k: int, cap: float) -> float:
        """E[min(X, cap)^k] in closed form (continuous law; rounding to tokens is ignored)."""
        cut = min(cap, self.tail_start)
        body = lognormal_partial(self.mu, self.sigma, k, cut)
        body_scale = (1.0 - self.weight) / self.body_mass if self.body_mass > 0 else 0.0
        total = body_scale * body
        if math.isinf(cap) and math.isinf(self.tail_start):
            return total
        if cap <= self.tail_start:
            # Mass beyond the cap sits at the cap (both body above cap and all of the tail).
            return total + cap**k * (1.0 - body_scale * body_cdf(self, cap))
        return total + self.weight * pareto_clipped_moment(self.tail_start, self.alpha, k, cap)


def body_cdf(law: SplicedLognormal, x: float) -> float:
    return float(ndtr((math.log(x) - law.mu) / law.sigma))


def lognormal_partial(mu: float, sigma: float, k: int, a: float) -> float:
    """int_0^a x^k f(x) dx for a lognormal(mu, sigma): exp(k mu + k^2 s^2/2) Phi(...)."""
    if math.isinf(a):
        return math.exp(k * mu + 0.5 * k * k * sigma * sigma)
    z = (math.log(a) - mu - k * sigma * sigma) / sigma
    return math.exp(k * mu + 0.5 * k * k * sigma * sigma) * float(ndtr(z))


def pareto_clipped_moment(xm: float, alpha: float, k: int, cap: float) -> float:
    """E[min(X, cap)^k] for X ~ Pareto(alpha, xm); infinite when uncapped and k >= alpha."""
    if math.isinf(cap):
        return alpha * xm**k / (alpha - k) if alpha > k else math.inf
    if abs(k - alpha) < 1e-12:
        inside = alpha * xm**alpha * math.log(cap / xm)
    else:
        inside = alpha * xm**alpha * (cap ** (k - alpha) - xm ** (k - alpha)) / (k - alpha)
    return float(inside + cap**k * (xm / cap) ** alpha)  # float ** float is Any to mypy


def spliced_law(dist: LengthDist) -> SplicedLognormal:
    """The continuous law of a ``lognormal_pareto`` distribution."""
    assert dist.median is not None  # enforced by LengthDist's validator
    if dist.sigma is not None:
        mu, sigma = math.log(dist.median), dist.sigma
    elif dist.p99 is not None:
        mu, sigma = fit_lognormal(dist.median, dist.p99)
    else:
        raise InputError("workload.lengths.p99", None, "> median (or set sigma)")
    if dist.tail_start is None or dist.tail_alpha is None:
        return SplicedLognormal(mu, sigma)
    law = SplicedLognormal(mu, sigma, dist.tail_start, dist.tail_alpha)
    weight = 1.0 - law.body_mass if dist.tail_weight is None else dist.tail_weight
    return SplicedLognormal(mu, sigma, dist.tail_start, dist.tail_alpha, weight)


def finish(raw: np.ndarray, dist: LengthDist) -> np.ndarray:
    """Round to whole tokens, raise to ``min``, clip at ``max``."""
    hi = dist.max if dist.max is not None else np.iinfo(np.int64).max // 4
    result: np.ndarray = np.clip(np.rint(np.minimum(raw, float(hi))), dist.min, hi).astype(np.int64)
    return result


def read_lengths(path: str) -> np.ndarray:
    """Lengths from a JSON list, a text file (one per line) or a ``.npy`` array."""
    p = Path(path)
    try:
        if p.suffix == ".npy":
            data = np.load(p, allow_pickle=False)
        elif p.suffix == ".json":
            data = np.asarray(json.loads(p.read_text()), dtype=np.float64)
        else:
            data = np.loadtxt(p, dtype=np.float64, ndmin=1)
    except FileNotFoundError:
        raise InputError(PATH_FIELD, path, "an existing lengths file") from None
    except (OSError, ValueError, TypeError, UnicodeDecodeError) as exc:
        allowed = f"a JSON list, text or .npy file of lengths ({exc.__class__.__name__})"
        raise InputError(PATH_FIELD, path, allowed) from None
    arr = np.asarray(data, dtype=np.float64).ravel()
    if arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise InputError(PATH_FIELD, path, "a non-empty list of positive lengths")
    if np.any(arr > MAX_TOKENS):
        raise InputError(PATH_FIELD, path, f"lengths of at most {MAX_TOKENS:,} tokens (the "
                         f"longest is {float(arr.max()):.4g})")
    return np.rint(arr).astype(np.int64)


def make_sampler(dist: LengthDist) -> Sampler:
    """A function ``(n, rng) -> int64 lengths`` for ``dist`` (files are read once, here)."""
    return law_of(dist).sampler(dist)


def constant_value(dist: LengthDist) -> float:
    value = dist.value if dist.value is not None else dist.median
    assert value is not None  # the law's check
    return float(value)


def constant_sampler(dist: LengthDist) -> Sampler:
    const = finish(np.array([constant_value(dist)]), dist)[0]
    return lambda n, rng: np.full(n, const, dtype=np.int64)


def empirical_sampler(dist: LengthDist) -> Sampler:
    assert dist.path is not None  # the law's check
    pool = finish(read_lengths(dist.path).astype(np.float64), dist)
    return lambda n, rng: pool[rng.integers(0, pool.size, size=n)]


#: Samples drawn and finished per block by :func:`by_blocks` (measured on the 131k-GPU
#: step's 10 M samples: about 4x faster than one piece, flat from 8,192 to 131,072 a block;
#: benchmarks/README.md, "The closing round"). The smallest keeps a block's 64 KiB
#: temporaries below glibc's default threshold for fresh mappings.
SAMPLE_BLOCK = 1 << 13


def by_blocks(n: int, rng: np.random.Generator, quantile: Callable[[np.ndarray], np.ndarray],
              dist: LengthDist) -> np.ndarray:
    """``finish(quantile(rng.random(n)), dist)``, ``SAMPLE_BLOCK`` samples at a time.

    The same numbers: the uniforms are drawn in stream order (consecutive ``random`` calls
    continue one another) and every step is elementwise. Whole-array temporaries of millions
    of samples are fresh mappings whose page faults cost more than the arithmetic; a block's
    stay in cache.
    """
    out = np.empty(n, dtype=np.int64)
    for start in range(0, n, SAMPLE_BLOCK):
        end = min(start + SAMPLE_BLOCK, n)
        out[start:end] = finish(quantile(rng.random(end - start)), dist)
    return out


def lognormal_pareto_sampler(dist: LengthDist) -> Sampler:
    law = spliced_law(dist)
    return lambda n, rng: by_blocks(n, rng, law.quantile, dist)


def mixture_sampler(dist: LengthDist) -> Sampler:
    parts = [make_sampler(c.dist) for c in dist.components]
    weights = np.array([c.weight for c in dist.components], dtype=np.float64)
    probs = weights / weights.sum()

    def draw(n: int, rng: np.random.Generator) -> np.ndarray:
        which = rng.choice(len(parts), size=n, p=probs)
        out = np.empty(n, dtype=np.int64)
        for k, part in enumerate(parts):
            mask = which == k
            out[mask] = part(int(mask.sum()), rng)
        return np.clip(out, dist.min, dist.max or np.iinfo(np.int64).max)

    return draw


def sample_lengths(dist: LengthDist, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` raw sample lengths (int64, >= ``dist.min``, <= ``dist.max`` when set)."""
    if n < 0:
        raise InputError("n", n, ">= 0")
    return make_sampler(dist)(n, rng)


def moment(dist: LengthDist, k: int) -> float:
    """E[l^k] of the distribution, analytic where a closed form exists (its law's moment).

    ``lognormal_pareto`` uses the continuous law (token rounding ignored, ``min`` ignored);
    ``empirical`` is the file's own mean; ``mixture`` the weighted sum of its components.
    """
    return law_of(dist).moment(dist, k)


def cap_of(dist: LengthDist) -> float:
    return float(dist.max) if dist.max is not None else math.inf


def constant_moment(dist: LengthDist, k: int) -> float:
    return min(max(constant_value(dist), dist.min), cap_of(dist)) ** k


def empirical_moment(dist: LengthDist, k: int) -> float:
    assert dist.path is not None  # the law's check
    pool = np.minimum(read_lengths(dist.path).astype(np.float64), cap_of(dist))
    return float(np.mean(np.maximum(pool, dist.min) ** k))


def mixture_moment(dist: LengthDist, k: int) -> float:
    w = np.array([c.weight for c in dist.components], dtype=np.float64)
    parts = [moment(c.dist, k) for c in dist.components]
    return float(np.dot(w / w.sum(), parts))


def lognormal_pareto_moment(dist: LengthDist, k: int) -> float:
    return spliced_law(dist).clipped_moment(k, cap_of(dist))


def length_cv(dist: LengthDist) -> float:
    """Coefficient of variation sigma/mu of the raw sample length."""
    m1, m2 = moment(dist, 1), moment(dist, 2)
    return math.sqrt(max(m2 - m1 * m1, 0.0)) / m1


def fit_to_data(lengths: np.ndarray, tail_quantile: float) -> dict[str, float | int]:
    """Fit a spliced ``lognormal_pareto`` to observed lengths (the numbers a YAML commits).

    Body: mu = ln(median); sigma by least squares of the log-quantiles on the probits between
    the 5th percentile and ``tail_quantile``. Tail: starts at the data's ``tail_quantile``
    quantile, carries the observed share above it, and its Pareto index is the Hill (maximum
    likelihood) estimate from those points. ``min``/``max`` are the data's extremes.
    """
    data = np.sort(np.asarray(lengths, dtype=np.float64))
    if data.size < 100 or not 0.5 < tail_quantile < 1:
        raise InputError("tail_quantile", tail_quantile, "in (0.5, 1) with >= 100 lengths")
    median = float(np.median(data))
    probs = np.linspace(0.05, tail_quantile, 40)
    z = ndtri(probs)
    resid = np.log(np.quantile(data, probs)) - math.log(median)
    sigma = float(np.dot(z, resid) / np.dot(z, z))
    start = float(np.quantile(data, tail_quantile))
    tail = data[data > start]
    return {
        "median": median,
        "sigma": round(sigma, 4),
        "tail_start": round(start, 1),
        "tail_weight": round(tail.size / data.size, 5),
        "tail_alpha": round(float(tail.size / np.log(tail / start).sum()), 4),
        "min": int(data[0]),
        "max": int(data[-1]),
    }


# ----------------------------------------------------------------------------- the laws


def no_fields(_dist: LengthDist, _where: str) -> None:
    """A law that reads only the shared fields (``min``, ``max``)."""


@dataclass(frozen=True)
class LengthLaw:
    """One length law as ``workload.lengths.kind`` names it.

    ``sampler(dist)``: the ``(n, rng) -> int64 lengths`` function of a distribution of this
    law (files read once, there); ``moment(dist, k)``: E[l^k], in closed form where one exists;
    ``check(dist, where)``: the fields the law needs, refused (one line naming ``where``, the
    distribution's dotted path, e.g. ``workload.lengths``) before any work.
    """

    name: str
    sampler: Callable[[LengthDist], Sampler] = field(compare=False)
    moment: Callable[[LengthDist, int], float] = field(compare=False)
    check: Callable[[LengthDist, str], None] = field(default=no_fields, compare=False)


def needs_median(dist: LengthDist, where: str) -> None:
    if dist.median is None:
        raise InputError(f"{where}.median", None, "> 0 for lognormal_pareto (with p99)")


def needs_value(dist: LengthDist, where: str) -> None:
    if dist.value is None and dist.median is None:
        raise InputError(f"{where}.value", None, "> 0 for constant")


def needs_path(dist: LengthDist, where: str) -> None:
    if not dist.path:
        raise InputError(f"{where}.path", None, "a lengths file for empirical")
    read_lengths(dist.path)  # a missing, malformed or out-of-bounds file: before any work


def needs_components(dist: LengthDist, where: str) -> None:
    if not dist.components:
        raise InputError(f"{where}.components", (), "a non-empty list for mixture")
    for i, part in enumerate(dist.components):
        law_of(part.dist, f"{where}.components.{i}.dist")


def quantile_sampler(dist: LengthDist) -> Sampler:
    law = QuantileLaw.of(dist.knots)
    return lambda n, rng: by_blocks(n, rng, law.quantile, dist)


def quantile_moment(dist: LengthDist, k: int) -> float:
    return QuantileLaw.of(dist.knots).clipped_moment(k, cap_of(dist))


def needs_knots(dist: LengthDist, where: str) -> None:
    if not dist.knots:
        raise InputError(f"{where}.knots", (), "[[probability, length], ...] for quantile")
    QuantileLaw.of(dist.knots)  # malformed knots are bad input before any work


#: Entry-point group third-party length laws register under.
GROUP = "libra_des.length_laws"
#: The shipped laws, registered on the first look-up (``lognormal_pareto`` is the default).
SHIPPED = (
    LengthLaw("lognormal_pareto", lognormal_pareto_sampler, lognormal_pareto_moment,
              needs_median),
    LengthLaw("empirical", empirical_sampler, empirical_moment, needs_path),
    LengthLaw("constant", constant_sampler, constant_moment, needs_value),
    LengthLaw("mixture", mixture_sampler, mixture_moment, needs_components),
    LengthLaw("quantile", quantile_sampler, quantile_moment, needs_knots),
)


#: The process's registry (a plug-in registry is the one piece of module state by design).
REGISTRY: Registry[LengthLaw] = Registry(
    "length law", "workload.lengths.kind",
    shipped_then_entry_points(lambda: SHIPPED, GROUP, LengthLaw),
)
register = REGISTRY.register
names = REGISTRY.names


WHERE = "workload.lengths"


def law_of(dist: LengthDist, where: str = WHERE) -> LengthLaw:
    """The registered law of ``dist`` (at dotted path ``where``), its fields checked."""
    try:
        law = REGISTRY.get(dist.kind)
    except InputError as exc:  # the registry names the top-level field
        raise exc.renamed({REGISTRY.field: f"{where}.kind"}) from None
    law.check(dist, where)
    return law


def check(dist: LengthDist | None) -> None:
    """Refuse, before any work, a distribution of no registered law or missing its fields."""
    if dist is not None:
        law_of(dist)
