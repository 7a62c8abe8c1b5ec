"""Inter-pool imbalance R - 1 vs pool size P for VRSP, Zigzag+Swap and Random, with the LLN.

Replays the configuration simulator (``libra-des plan``, :func:`libra_des.api.replay_plans`)
on both corpora (GBS 128): the mean over windows with the worst
window as a whisker, and the analytic estimate (CV/sqrt(P))·sqrt(2 ln(D/P)) that Random
grouping should follow. Quick mode replays 4 windows instead of 20.
"""

from __future__ import annotations

import numpy as np

from libra_des.report.figures import outside_legend
from paper_figs import common

NAME = "pool_imbalance"
TITLE = "Inter-pool imbalance per grouping policy"
GROUPING_STYLES = {
    "random": ("#7f7f7f", "Random"),
    "zigzag_swap": ("#ff7f0e", "Zigzag + Swap"),
    "vrsp": ("#1f77b4", "VRSP"),
}


def make(opts: common.FigOptions) -> common.Drawn:
    windows = opts.pick(20, 4, 1)
    pools = opts.pick((2, 4, 8, 16, 32, 64), (2, 4, 8, 16, 32, 64), (2, 4))
    datasets = opts.pick(common.DATASETS, common.DATASETS, ("1m",))
    gbs = opts.pick(128, 128, 16)
    fig, axes = common.new_figure(len(datasets), width=5.4)
    rows = []
    for ax, data in zip(axes, datasets, strict=True):
        out = common.replay_plans(
            opts,
            f"{NAME}/{data}",
            workload=f"paper-{data}",
            gbs=gbs,
            windows=windows,
            pool_sizes=pools,
            policies=list(GROUPING_STYLES),
        )
        by = {(r["policy"], r["pool_size"]): r for r in out["results"]}
        for policy, (color, words) in GROUPING_STYLES.items():
            mean = np.array([by[(policy, p)]["inter_pool_imbalance"] for p in pools])
            worst = np.array([by[(policy, p)]["inter_pool_imbalance_max"] for p in pools])
            ax.errorbar(
                pools,
                mean,
                yerr=[np.zeros_like(mean), worst - mean],
                color=color,
                marker="o",
                capsize=3,
                label=f"{words} (mean; bar to worst window)",
            )
            rows += [
                {"dataset": data, "policy": words, "pool_size": p, "mean": m, "worst": w}
                for p, m, w in zip(pools, mean, worst, strict=True)
            ]
        lln = [by[("random", p)]["lln_estimate"] for p in pools]
        ax.plot(pools, lln, "k--", label="law-of-large-numbers estimate for Random")
        rows += [
            {"dataset": data, "policy": "LLN estimate", "pool_size": p, "mean": v}
            for p, v in zip(pools, lln, strict=True)
        ]
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(pools, [str(p) for p in pools])
        common.label_axes(
            ax,
            "pool size P (packed sequences per pool)",
            "inter-pool imbalance R - 1 (dimensionless, log)",
            f"{data.upper()} corpus",
        )
        outside_legend(ax)
    fig.suptitle(f"Pool groupings, GBS {gbs}, {windows} windows")
    return common.save(
        fig,
        opts,
        NAME,
        TITLE,
        common.caption("plan --workload paper-{256k,1m}", opts, "planner only"),
        rows,
    )
