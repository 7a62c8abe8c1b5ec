"""Pool-size sweep: attention computation vs exposed and hidden communication per GPU.

Scenarios ``paper-pool-sweep-{256k,1m}`` (DP 64, GBS 128, Libra Full), P in 2..64. Bars stack
computation and *exposed* communication (both on the critical path); the hatched bar beside
them is communication hidden behind computation by the Pipeliner (off the critical path).

Layout note: the shipped 256K scenario (CP 4) does not fit its gradient-sync group on the
rail-optimised topology (DP 64 replicas at one per node on 32 nodes; a layout bug handled
elsewhere), so this figure runs the 256K corpus at CP 8 and says so in the caption.
Quick mode: one step per point instead of two.
"""

from __future__ import annotations

import numpy as np

from libra_des.report.figures import outside_legend
from paper_figs import common

NAME = "pool_sweep"
TITLE = "Pool-size sweep: computation vs communication"
#: Reduced layouts that run today (see the module docstring).
LAYOUT = {"256k": ["parallelism.cp=8"], "1m": []}


def make(opts: common.FigOptions) -> common.Drawn:
    pools = opts.pick((2, 4, 8, 16, 32, 64), (2, 4, 8, 16, 32, 64), (1, 2))
    datasets = opts.pick(common.DATASETS, common.DATASETS, ("1m",))
    base = opts.pick([], ["steps=1"], list(common.TINY_TRAINING))
    fig, axes = common.new_figure(len(datasets), width=5.6, height=4.4)
    x = np.arange(len(pools))
    rows, fidelity = [], ""
    for ax, data in zip(axes, datasets, strict=True):
        study = common.sweep(
            opts,
            f"{NAME}/{data}",
            f"paper-pool-sweep-{data}.yaml",
            [common.grid("balancer.pool_size", pools)],
            [*base, *LAYOUT[data]],
        )
        fidelity = study.fidelity

        def stat(key: str, s: common.Study = study) -> np.ndarray:
            return np.array([s.stat((i,), lambda r: r[key]) for i in range(len(pools))])

        compute, exposed = stat("attention_compute_s"), stat("attention_comm_exposed_s")
        hidden = stat("attention_comm_hidden_s")
        ax.bar(x - 0.2, compute[:, 0], 0.4, color="#1f77b4", label="computation")
        ax.bar(
            x - 0.2,
            exposed[:, 0],
            0.4,
            bottom=compute[:, 0],
            yerr=common.spread(exposed[:, 1]),
            color="#d62728",
            capsize=3,
            label="exposed communication",
        )
        ax.bar(
            x + 0.2,
            hidden[:, 0],
            0.4,
            yerr=common.spread(hidden[:, 1]),
            color="white",
            edgecolor="#2ca02c",
            hatch="///",
            capsize=3,
            label="hidden communication (overlapped)",
        )
        ax.set_xticks(x, [str(p) for p in pools])
        common.label_axes(
            ax,
            "pool size P (DP replicas per pool)",
            "core attention per GPU per step (s)",
            f"{data.upper()} corpus{' (CP 8)' if LAYOUT[data] else ''}",
        )
        top = max((compute[:, 0] + exposed[:, 0]).max(), hidden[:, 0].max())
        ax.set_ylim(top=top * 1.35 if top > 0 else 1.0)
        outside_legend(ax)
        rows += [
            {
                "dataset": data,
                "pool_size": p,
                "compute_s": c[0],
                "compute_s_sd": c[1],
                "exposed_comm_s": e[0],
                "exposed_comm_s_sd": e[1],
                "hidden_comm_s": h[0],
                "hidden_comm_s_sd": h[1],
            }
            for p, c, e, h in zip(pools, compute, exposed, hidden, strict=True)
        ]
    fig.suptitle("Pool-size sweep, Libra Full (VRSP + TAP + Pipeliner), GBS 128")
    text = common.caption(
        "paper-pool-sweep-{256k,1m}",
        opts,
        fidelity,
        "256K corpus at CP 8 (the shipped CP 4 layout does not fit)",
    )
    return common.save(fig, opts, NAME, TITLE, text, rows)
