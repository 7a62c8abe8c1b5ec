"""Pool-size sweep: attention computation vs exposed and hidden communication per GPU.

Scenarios ``paper-pool-sweep-{256k,1m}`` (DP 64, GBS 128, Libra Full), P in 2..64. Bars stack
computation and *exposed* communication (both on the critical path); the hatched bar beside
them is communication hidden behind computation by the Pipeliner (off the critical path).
Quick mode: one step per point instead of two.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from libra_des.figures import common

NAME = "pool_sweep"
POOLS = (2, 4, 8, 16, 32, 64)


def make(opts: common.FigOptions) -> Path:
    base = ["steps=1"] if opts.quick else []
    fig, panels = common.dataset_panels(opts, NAME, "paper-pool-sweep",
                                        [common.grid("balancer.pool_size", POOLS)], base)
    x = np.arange(len(POOLS))
    for ax, data, res in panels:
        rows = [res[(i,)] for i in range(len(POOLS))]
        compute = np.array([r["attention_compute_s"] for r in rows])
        exposed = np.array([r["attention_comm_exposed_s"] for r in rows])
        hidden = np.array([r["attention_comm_hidden_s"] for r in rows])
        ax.bar(x - 0.2, compute, 0.4, color="#1f77b4", label="computation")
        ax.bar(x - 0.2, exposed, 0.4, bottom=compute, color="#d62728",
               label="exposed communication")
        ax.bar(x + 0.2, hidden, 0.4, color="white", edgecolor="#2ca02c", hatch="///",
               label="hidden communication (overlapped)")
        ax.set_xticks(x, [str(p) for p in POOLS])
        ax.set_xlabel("pool size P (DP replicas per pool; DP = 64)")
        ax.set_ylabel("core attention per GPU per step (s)")
        ax.set_title(f"{data.upper()}-token sequences")
        ax.grid(axis="y", alpha=0.3)
        ax.set_ylim(top=max((compute + exposed).max(), hidden.max()) * 1.3)
        ax.legend(loc="upper left", fontsize="small")
    fig.suptitle("Pool-size sweep, Libra Full (VRSP + TAP + Pipeliner), GBS 128")
    return common.save(fig, opts, NAME)


if __name__ == "__main__":
    sys.exit(common.script_main(make, __doc__))
