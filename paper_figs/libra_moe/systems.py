"""The MoE systems study: one sweep of every shipped system, and its bar figures' shape.

Scenario ``paper-moe-breakdown`` (Qwen3-235B-A22B on 8x H200 NVSwitch, sequence 1024, batch
32) under SGLang, EPLB, Lina, HarMoEny and Libra; one sweep feeds ``layer_breakdown`` and the
three bar figures (``throughput``, ``ttft``, ``imbalance``), each a
:class:`SystemBars`. Quick mode simulates 8 layers and 1 batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from paper_figs import common

SCENARIO = "paper-moe-breakdown.yaml"


def systems_study(opts: common.FigOptions) -> common.Study:
    base = opts.pick([], ["model.layers=8", "workload.batches=1"], list(common.TINY_MOE))
    axis = common.grid("balancer.policy", list(common.MOE_SYSTEMS))
    return common.sweep(opts, "moe-systems", SCENARIO, [axis], base)


def bar_figure(
    opts: common.FigOptions,
    name: str,
    title: str,
    ylabel: str,
    fn: Callable[[dict[str, Any]], float],
    key: str,
) -> common.Drawn:
    """One bar per system with seed error bars."""
    study = systems_study(opts)
    names = list(common.MOE_SYSTEMS.values())
    stats = np.array([study.stat((i,), fn) for i in range(len(names))])
    fig, (ax,) = common.new_figure(1, width=6.0, height=4.0)
    x = np.arange(len(names))
    ax.bar(
        x,
        stats[:, 0],
        yerr=common.spread(stats[:, 1]),
        capsize=3,
        color=[common.COLORS[n] for n in names],
    )
    for xi, v in zip(x, stats[:, 0], strict=True):
        ax.annotate(f"{v:.3g}", (xi, v), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, names)
    cut = common.truncation(study.scenario, study.layers)
    # A whole-model value of a cut model is the slice's, not the named model's: say so.
    common.label_axes(ax, "system", f"{ylabel}\n({cut} simulated)" if cut else ylabel, title)
    model = common.model_title("Qwen3-235B-A22B", study.scenario, study.layers)
    fig.suptitle(f"{model} prefill, 8x H200, seq 1024 x batch 32")
    rows = [{"system": n, key: m, f"{key}_sd": s} for n, (m, s) in zip(names, stats, strict=True)]
    return common.save(
        fig, opts, name, title, common.caption(study, opts, study.fidelity), rows
    )


@dataclass(frozen=True)
class SystemBars:
    """One bar figure of the systems sweep: which metric, how it is labelled and stored.

    ``NAME`` / ``TITLE`` / ``make`` are what the figure catalogue reads of every figure.
    """

    NAME: str
    TITLE: str
    ylabel: str
    value: Callable[[dict[str, Any]], float]
    column: str

    def make(self, opts: common.FigOptions) -> common.Drawn:
        return bar_figure(opts, self.NAME, self.TITLE, self.ylabel, self.value, self.column)
