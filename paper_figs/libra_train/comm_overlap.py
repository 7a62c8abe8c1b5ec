"""Communication per GPU per step, hidden vs exposed, per policy (quickstart sweep).

``comm_hidden_fraction`` is communication overlapped with computation (Pipeliner chunks,
gradient buckets under the backward), ``comm_exposed_fraction`` the part on the critical
path; both are fractions of the step, drawn here as seconds per step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from libra_des.report.figures import outside_legend
from paper_figs import common
from paper_figs.libra_train.step_breakdown import policy_study

NAME = "comm_overlap"
TITLE = "Hidden vs exposed communication per policy"


def seconds(key: str) -> Callable[[dict[str, Any]], float]:
    """A step-time fraction as seconds per step."""

    def get(result: dict[str, Any]) -> float:
        return float(result[key]) * float(result["step_time_s"]["mean"])

    return get


def make(opts: common.FigOptions) -> common.Drawn:
    labels, study = policy_study(opts)
    fig, (ax,) = common.new_figure(1, width=7.0, height=4.2)
    x = np.arange(len(labels))
    rows = []
    for offset, key, words, color in (
        (-0.2, "comm_exposed_fraction", "exposed", "#d62728"),
        (0.2, "comm_hidden_fraction", "hidden", "#2ca02c"),
    ):
        stats = np.array([study.stat((v,), seconds(key)) for v in range(len(labels))])
        ax.bar(
            x + offset,
            stats[:, 0],
            0.4,
            yerr=common.spread(stats[:, 1]),
            color=color,
            capsize=3,
            label=f"{words} communication",
        )
        rows += [
            {"policy": lb, "kind": words, "seconds_per_step": m, "seconds_per_step_sd": s}
            for lb, (m, s) in zip(labels, stats, strict=True)
        ]
    ax.set_xticks(x, labels, rotation=20, ha="right")
    common.label_axes(
        ax,
        "policy",
        "communication per GPU per step (s)",
        "Communication on and off the critical path",
    )
    outside_legend(ax)
    return common.save(
        fig, opts, NAME, TITLE, common.caption(study, opts, study.fidelity), rows
    )
