"""Per-microbatch forward-time distribution under pipeline parallelism: Ulysses vs Libra.

Scenarios ``paper-pp-microbatch-{256k,1m}`` (DP 8 x PP 4, 8 microbatches per replica, 1F1B);
the result key ``microbatch_forward_s`` holds every first-stage forward op of every step (all
seeds pooled). Bins follow numpy's ``auto`` rule (Sturges / Freedman-Diaconis), so a few dozen
samples get a handful of bins. The paper uses 15 iterations; quick mode runs 3.
"""

from __future__ import annotations

import numpy as np

from libra_des.report.figures import outside_legend
from paper_figs import common

NAME = "pp_microbatch"
TITLE = "Per-microbatch forward-time distribution under PP"
LABELS = ("Ulysses", "Libra Full")


def make(opts: common.FigOptions) -> common.Drawn:
    steps = opts.pick(15, 3, 2)
    datasets = opts.pick(common.DATASETS, common.DATASETS, ("1m",))
    base = opts.pick([], [], [*common.TINY_TRAINING, "parallelism.pp=2", "parallelism.gbs=8"])
    fig, axes = common.new_figure(len(datasets), width=5.6, height=4.4)
    rows, scenario, fidelity = [], "", ""
    for ax, data in zip(axes, datasets, strict=True):
        study = common.sweep(
            opts,
            f"{NAME}/{data}",
            f"paper-pp-microbatch-{data}.yaml",
            [common.variant_axis(LABELS)],
            [*base, f"steps={steps}"],
        )
        scenario, fidelity = "paper-pp-microbatch-{256k,1m}", study.fidelity
        times = [
            np.concatenate(
                [np.asarray(r["microbatch_forward_s"], dtype=float) for r in study.runs[(v,)]]
            )
            for v in range(len(LABELS))
        ]
        edges = np.histogram_bin_edges(np.concatenate(times), bins="auto")
        for label, t in zip(LABELS, times, strict=True):
            counts, _ = np.histogram(t, bins=edges)
            frac = counts / t.size
            color = common.COLORS[label]
            cv = t.std() / t.mean()
            ax.stairs(
                frac,
                edges,
                fill=True,
                alpha=0.45,
                color=color,
                label=f"{label} ({t.size} ops): CV {cv:.3f}, "
                f"max/median {t.max() / np.median(t):.2f}",
            )
            rows += [
                {"dataset": data, "policy": label, "bin_lo_s": lo, "bin_hi_s": hi, "fraction": f}
                for lo, hi, f in zip(edges[:-1], edges[1:], frac, strict=True)
            ]
        common.label_axes(
            ax,
            "forward time of one microbatch on stage 0 (s)",
            "fraction of forward ops",
            f"{data.upper()}-token packed sequences",
        )
        outside_legend(ax)
    fig.suptitle(f"Microbatch forward-time distribution, PP 4 x DP 8, {steps} iterations")
    return common.save(fig, opts, NAME, TITLE, common.caption(scenario, opts, fidelity), rows)
