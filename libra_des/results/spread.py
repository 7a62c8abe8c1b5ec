"""A scenario over several seeds: the seeds, each headline metric's spread, paired ratios.

Seeds come from the scenario's own seed, so one command always runs the same seeds: the first
is the scenario's seed itself (its run is the single-seed run, byte for byte), seed ``i >= 1``
is the first 32-bit word of ``numpy.random.SeedSequence([seed, i])`` (independent streams by
SeedSequence's hashing; any fixed derivation would do, this one is our choice).

Spread of a metric over N seeds: mean, sample standard deviation (ddof 1; 0 for one seed), min
and max. A ratio between two runs of the same seeds (a speed-up) is paired per seed; its
interval is Student's t interval on the mean of the per-seed ratios (95 % by default, N - 1
degrees of freedom), which assumes the per-seed ratios are independent draws of one
distribution. With one seed there is no interval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from libra_des.base.numbers import sig3

#: The most seeds one command runs (our choice: a thousand runs of even a tiny scenario are
#: minutes; a larger count is a typo such as 1e9).
MAX_SEEDS = 1000
#: Confidence of the paired-ratio interval (our choice: the usual 95 %).
CONFIDENCE = 0.95


def derive_seeds(seed: int, count: int) -> list[int]:
    """``count`` seeds from the scenario's ``seed``; the first is ``seed`` itself."""
    extra = [int(np.random.SeedSequence([seed, i]).generate_state(1)[0])
             for i in range(1, count)]
    return [seed, *extra]


def lookup(result: Mapping[str, Any], dotted: str) -> float | None:
    """A number at a dotted path of a result, or None where it is absent or not a number."""
    value: Any = result
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def spread(values: Sequence[float]) -> dict[str, Any]:
    """Mean, sample std (ddof 1; 0 for one value), min, max and the values themselves."""
    x = np.asarray(values, dtype=np.float64)
    std = float(x.std(ddof=1)) if x.size > 1 else 0.0
    return {"mean": float(x.mean()), "std": std, "min": float(x.min()),
            "max": float(x.max()), "per_seed": [float(v) for v in x]}


def metric_spreads(results: Sequence[Mapping[str, Any]],
                   metrics: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each metric every result holds as a number: its spread over the results."""
    out: dict[str, dict[str, Any]] = {}
    for dotted in metrics:
        values = [lookup(r, dotted) for r in results]
        if all(v is not None for v in values):
            out[dotted] = spread([float(v) for v in values if v is not None])
    return out


def paired_ratio(numerators: Sequence[float], denominators: Sequence[float],
                 confidence: float = CONFIDENCE) -> dict[str, Any]:
    """Per-seed ratios ``numerators[i] / denominators[i]``, their spread and the t interval
    on their mean (module docstring); ``interval`` is None for one seed."""
    from scipy import stats

    ratios = np.asarray(numerators, dtype=np.float64) / np.asarray(denominators, np.float64)
    out = spread(ratios.tolist())
    n = ratios.size
    if n < 2:
        return {**out, "interval": None, "method": "one seed: no interval"}
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1) * out["std"] / np.sqrt(n))
    return {**out, "interval": [out["mean"] - half, out["mean"] + half],
            "method": f"Student t, {confidence:.0%} on the mean of {n} paired per-seed "
                      f"ratios ({n - 1} degrees of freedom)"}


def seeds_section(seeds: Sequence[int], steps: int, results: Sequence[Mapping[str, Any]],
                  metrics: Sequence[str]) -> dict[str, Any]:
    """``result.json``'s ``seeds``: the seeds, the steps each ran and every headline metric's
    spread over them."""
    return {"count": len(seeds), "seeds": list(seeds), "steps": steps,
            "derivation": "seed 0 is the scenario's; seed i is SeedSequence([seed, i])'s "
                          "first 32-bit word",
            "metrics": metric_spreads(results, metrics)}


def show_spread(s: Mapping[str, Any], count: int, steps: int) -> str:
    """``mean ± std (min … max; N seeds, S steps)`` as the page prints it."""
    return (f"{sig3(s['mean'])} ± {sig3(s['std'])} (min {sig3(s['min'])}, max {sig3(s['max'])}; "
            f"{count} seeds, {steps} step(s))")
