"""Inter-pool imbalance R - 1 vs pool size P for VRSP, Zigzag+Swap and Random, with the LLN.

Runs ``libra-des plan --json`` on both corpora (GBS 128): bars of the mean over windows with
the worst window as a whisker, and the analytic estimate (CV/sqrt(P))·sqrt(2 ln(D/P)) that
Random grouping should follow. Quick mode replays 4 windows instead of 20.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from libra_des.figures import common

NAME = "pool_imbalance"
POOLS = (2, 4, 8, 16, 32, 64)
POLICIES = {"random": "#7f7f7f", "zigzag_swap": "#ff7f0e", "vrsp": "#1f77b4"}


def make(opts: common.FigOptions) -> Path:
    windows = 4 if opts.quick else 20
    fig, axes = common.new_figure(len(common.DATASETS), width=5.4)
    for ax, data in zip(axes, common.DATASETS, strict=True):
        out = common.plan_json(opts, f"{NAME}/{data}", [
            "--workload", f"longctx-{data}", "--gbs", "128", "--windows", str(windows),
            "--pool-size", ",".join(map(str, POOLS)), "--policy", ",".join(POLICIES),
        ])
        rows = {(r["policy"], r["pool_size"]): r for r in out["results"]}
        for policy, color in POLICIES.items():
            mean = np.array([rows[(policy, p)]["inter_pool_imbalance"] for p in POOLS])
            worst = np.array([rows[(policy, p)]["inter_pool_imbalance_max"] for p in POOLS])
            ax.errorbar(POOLS, mean, yerr=[np.zeros_like(mean), worst - mean], color=color,
                        marker="o", capsize=3, label=f"{policy} (mean, bar to worst)")
        lln = [rows[("random", p)]["lln_estimate"] for p in POOLS]
        ax.plot(POOLS, lln, "k--", label="LLN estimate for random")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(POOLS, [str(p) for p in POOLS])
        ax.set_xlabel("pool size P (packed sequences per pool)")
        ax.set_ylabel("inter-pool imbalance R - 1 (log scale)")
        ax.set_title(f"{data.upper()} corpus")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize="small")
    fig.suptitle(f"Pool groupings, GBS 128, {windows} windows")
    return common.save(fig, opts, NAME)


if __name__ == "__main__":
    sys.exit(common.script_main(make, __doc__))
