"""Core-attention straggler latency (slowest worker per call), mean and max, per policy.

Scenarios ``paper-attention-microbench-{256k,1m}`` (attention only, synthetic KV heads, DP 16):
Ulysses, WLB-LLM, DistCA and the Libra ladder TAP / TAP+VRSP / Full. Quick mode: one step
(one GBS window of 128 sequences) instead of two.
"""

from __future__ import annotations

import numpy as np

from libra_des.report.figures import outside_legend
from paper_figs import common

NAME = "attention_straggler"
TITLE = "Core-attention straggler latency, mean and max, per baseline"


def make(opts: common.FigOptions) -> common.Drawn:
    labels = opts.pick(
        common.ALL_VARIANTS, common.ALL_VARIANTS, ("Ulysses", "DistCA", "Libra Full")
    )
    datasets = opts.pick(common.DATASETS, common.DATASETS, ("1m",))
    base = opts.pick([], ["steps=1"], [*common.TINY_TRAINING, "parallelism.cp=4"])
    fig, axes = common.new_figure(len(datasets), width=5.6, height=4.4)
    x = np.arange(len(labels))
    rows, scenario, fidelity = [], "", ""
    for ax, data in zip(axes, datasets, strict=True):
        study = common.sweep(
            opts,
            f"{NAME}/{data}",
            f"paper-attention-microbench-{data}.yaml",
            [common.variant_axis(labels)],
            base,
        )
        scenario, fidelity = study.scenario.rsplit("-", 1)[0] + "-{256k,1m}", study.fidelity
        mean = (
            np.array(
                [
                    study.stat((v,), lambda r: r["attention_straggler_s"]["mean"])
                    for v in range(len(labels))
                ]
            )
            * 1e3
        )
        peak = (
            np.array(
                [
                    study.stat((v,), lambda r: r["attention_straggler_s"]["max"])
                    for v in range(len(labels))
                ]
            )
            * 1e3
        )
        colors = [common.COLORS[lb] for lb in labels]
        ax.bar(
            x - 0.2,
            mean[:, 0],
            0.4,
            yerr=common.spread(mean[:, 1]),
            color=colors,
            edgecolor="black",
            capsize=3,
            label="mean over the window's calls",
        )
        ax.bar(
            x + 0.2,
            peak[:, 0],
            0.4,
            yerr=common.spread(peak[:, 1]),
            color=colors,
            edgecolor="black",
            hatch="//",
            alpha=0.6,
            capsize=3,
            label="max over the window's calls",
        )
        ax.set_xticks(x, labels, rotation=25, ha="right")
        common.label_axes(
            ax,
            "policy",
            "slowest worker per attention call (ms, one layer)",
            f"{data.upper()}-token sequences",
        )
        ax.set_ylim(top=peak[:, 0].max() * 1.35)
        outside_legend(ax)
        rows += [
            {
                "dataset": data,
                "policy": lb,
                "mean_ms": m[0],
                "mean_ms_sd": m[1],
                "max_ms": p[0],
                "max_ms_sd": p[1],
            }
            for lb, m, p in zip(labels, mean, peak, strict=True)
        ]
    fig.suptitle("Core-attention straggler latency per policy, GBS 128 window")
    return common.save(fig, opts, NAME, TITLE, common.caption(scenario, opts, fidelity), rows)
