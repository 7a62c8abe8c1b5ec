"""Where a training step goes, per policy: bubble, DP straggler wait, pool wait, exposed comm.

Scenario ``quickstart`` (1,024 GPUs, DP 32 x CP 8 x PP 4, 1M corpus) under every policy.
Each bar stacks the step-time fractions of ``result.json`` (definitions in
``libra_des/results/metrics.py``); the remainder of the step is useful work. The same sweep feeds
``comm_overlap`` and ``throughput``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from libra_des.report.figures import outside_legend
from paper_figs import common

NAME = "step_breakdown"
TITLE = "Step-time breakdown per policy"
PARTS = {
    "bubble_fraction": "pipeline bubble",
    "dp_straggler_fraction": "DP straggler wait",
    "pool_wait_fraction": "pool / CP-group wait",
    "comm_exposed_fraction": "exposed communication",
}
PART_COLORS = ("#9edae5", "#ff9896", "#c5b0d5", "#d62728")


def fraction(key: str) -> Callable[[dict[str, Any]], float]:
    def get(result: dict[str, Any]) -> float:
        return float(result[key])

    return get


def policy_study(opts: common.FigOptions) -> tuple[tuple[str, ...], common.Study]:
    """The quickstart under each policy (shared by three figures; the sweep resumes)."""
    labels = opts.pick(common.ALL_VARIANTS, common.ALL_VARIANTS, ("Ulysses", "Libra Full"))
    base = opts.pick([], [], list(common.TINY_TRAINING))
    study = common.sweep(opts, "policies", "quickstart.yaml", [common.variant_axis(labels)], base)
    return labels, study


def make(opts: common.FigOptions) -> common.Drawn:
    labels, study = policy_study(opts)
    fig, (ax,) = common.new_figure(1, width=7.5, height=4.4)
    x = np.arange(len(labels))
    bottom = np.zeros(len(labels))
    rows = []
    for (key, words), color in zip(PARTS.items(), PART_COLORS, strict=True):
        stats = np.array([study.stat((v,), fraction(key)) for v in range(len(labels))])
        ax.bar(
            x,
            stats[:, 0] * 100,
            0.6,
            bottom=bottom * 100,
            yerr=common.spread(stats[:, 1] * 100),
            color=color,
            capsize=3,
            label=words,
        )
        bottom += stats[:, 0]
        rows += [
            {"policy": lb, "part": words, "percent_of_step": m * 100, "percent_of_step_sd": s * 100}
            for lb, (m, s) in zip(labels, stats, strict=True)
        ]
    ax.set_xticks(x, labels, rotation=20, ha="right")
    common.label_axes(
        ax, "policy", "share of the step time (%)", "Step time not spent computing, per policy"
    )
    outside_legend(ax)
    fig.suptitle("Quickstart: 1,024 H200 GPUs, DP 32 x CP 8 x PP 4, 1M corpus")
    return common.save(
        fig, opts, NAME, TITLE, common.caption(study, opts, study.fidelity), rows
    )
