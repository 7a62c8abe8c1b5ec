"""Training throughput and MFU per policy (quickstart sweep), with seed error bars."""

from __future__ import annotations

import numpy as np

from paper_figs import common
from paper_figs.libra_train.step_breakdown import policy_study

NAME = "throughput"
TITLE = "Training throughput and MFU per policy"


def make(opts: common.FigOptions) -> common.Drawn:
    labels, study = policy_study(opts)
    fig, (ax_t, ax_m) = common.new_figure(2, width=5.2, height=4.2)
    x = np.arange(len(labels))
    colors = [common.COLORS[lb] for lb in labels]
    tput = np.array(
        [study.stat((v,), lambda r: r["tokens_per_s"] / 1e6) for v in range(len(labels))]
    )
    mfu = np.array([study.stat((v,), lambda r: r["mfu"] * 100) for v in range(len(labels))])
    ax_t.bar(x, tput[:, 0], yerr=common.spread(tput[:, 1]), color=colors, capsize=3)
    ax_m.bar(x, mfu[:, 0], yerr=common.spread(mfu[:, 1]), color=colors, capsize=3)
    for ax in (ax_t, ax_m):
        ax.set_xticks(x, labels, rotation=20, ha="right")
    common.label_axes(ax_t, "policy", "throughput (million tokens/s)", "Cluster throughput")
    common.label_axes(ax_m, "policy", "model FLOPs utilisation (%)", "MFU")
    rows = [
        {
            "policy": lb,
            "million_tokens_per_s": t[0],
            "million_tokens_per_s_sd": t[1],
            "mfu_percent": m[0],
            "mfu_percent_sd": m[1],
        }
        for lb, t, m in zip(labels, tput, mfu, strict=True)
    ]
    return common.save(
        fig, opts, NAME, TITLE, common.caption(study, opts, study.fidelity), rows
    )
