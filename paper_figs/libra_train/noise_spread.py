"""Hardware noise with identical work: the per-step trimmed spread the variance model draws.

The paper's measurement (docs/model.md part A): 32K causal attention on 256 identical GPUs for 500
steps, fastest and slowest GPU dropped per step, (slowest - fastest) / fastest averaged 7.01%
and peaked at 15.07%. The work is identical, so a GPU's call time is a base time times its
noise factor and the base cancels: the figure draws the calibrated variance model
directly (:func:`libra_des.api.noise_factors`, no scenario), one histogram per
seed pooled, with the paper's mean and max marked.
"""

from __future__ import annotations

import numpy as np

from libra_des import api
from libra_des.report.figures import outside_legend
from paper_figs import common

NAME = "noise_spread"
TITLE = "Per-step noise spread on identical GPUs"
PAPER_MEAN, PAPER_MAX = 0.0701, 0.1507


def spread(seed: int, gpus: int, steps: int) -> np.ndarray:
    """Per-step (slowest - fastest) / fastest after dropping the extreme two GPUs."""
    times = api.noise_factors(gpus, steps, seed)
    kept = np.sort(times, axis=1)[:, 1:-1]
    return np.asarray((kept[:, -1] - kept[:, 0]) / kept[:, 0])


def make(opts: common.FigOptions) -> common.Drawn:
    gpus, steps = 256, opts.pick(500, 500, 50)
    seeds = opts.pick(tuple(range(5)), (0,), (0,))
    values = [spread(s, gpus, steps) * 100 for s in seeds]
    pooled = np.concatenate(values)
    edges = np.histogram_bin_edges(pooled, bins="auto")
    fig, (ax,) = common.new_figure(1, width=6.4, height=4.2)
    counts, _ = np.histogram(pooled, bins=edges)
    frac = counts / pooled.size
    ax.stairs(
        frac,
        edges,
        fill=True,
        alpha=0.6,
        color="#1f77b4",
        label=f"simulated ({len(seeds)} seed(s) x {steps} steps)",
    )
    means = np.array([v.mean() for v in values])
    maxes = np.array([v.max() for v in values])
    ax.axvline(means.mean(), color="#1f77b4", ls="-", label=f"simulated mean {means.mean():.2f}%")
    ax.axvline(maxes.mean(), color="#1f77b4", ls=":", label=f"simulated max {maxes.mean():.2f}%")
    ax.axvline(PAPER_MEAN * 100, color="k", ls="-", lw=0.8, label="paper mean 7.01%")
    ax.axvline(PAPER_MAX * 100, color="k", ls=":", lw=0.8, label="paper max 15.07%")
    common.label_axes(
        ax,
        "(slowest - fastest) / fastest per step (%)",
        "fraction of steps",
        f"Noise spread, {gpus} GPUs, identical 32K attention call",
    )
    outside_legend(ax)
    rows: list[dict[str, object]] = [
        {"series": "histogram", "bin_lo_percent": lo, "bin_hi_percent": hi, "fraction": f}
        for lo, hi, f in zip(edges[:-1], edges[1:], frac, strict=True)
    ]
    rows += [
        {"series": "simulated mean", "percent": means.mean()},
        {"series": "simulated max", "percent": maxes.mean()},
        {"series": "paper mean", "percent": PAPER_MEAN * 100},
        {"series": "paper max", "percent": PAPER_MAX * 100},
    ]
    text = (
        f"variance model only (calibrated defaults); seeds {','.join(map(str, seeds))}; "
        f"fidelity n/a; {opts.mode} mode"
    )
    return common.save(fig, opts, NAME, TITLE, text, rows)
