"""Throughput as DP grows 1 -> 16 at a fixed GBS: Ulysses vs Libra TAP / TAP+VRSP / Full.

Scenario ``paper-dp-scaling-1m`` (GBS 32 packed 1M-token sequences, CP 8, Qwen3-30B-A3B);
the pool size follows P = min(8, DP) because P must divide DP. Quick mode: one step per point
instead of the scenario's three.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from matplotlib.ticker import ScalarFormatter

from paper_figs import common

NAME = "dp_scaling"
LABELS = ("Ulysses", "Libra TAP", "Libra TAP+VRSP", "Libra Full")
DPS = (1, 2, 4, 8, 16)


def make(opts: common.FigOptions) -> Path:
    dp_axis = common.zipped({"parallelism.dp": DPS,
                      "balancer.pool_size": [min(8, dp) for dp in DPS]})
    # At DP 1 the experts' optimizer states are not sharded (their ZeRO group is DP) and a
    # GPU needs about 133 GiB: simulate anyway and let result.json flag it (oom: true).
    base = ["memory.check=warn", *(["steps=1"] if opts.quick else [])]
    res = common.by_coords(common.sweep(opts, f"{NAME}/1m", "paper-dp-scaling-1m.yaml",
                          [common.variant_axis(LABELS), dp_axis], base))
    fig, (ax_total, ax_gpu) = common.new_figure(2, width=5.6)
    for v, label in enumerate(LABELS):
        tput = np.array([res[(v, d)]["tokens_per_s"] for d in range(len(DPS))])
        gpus = np.array([res[(v, d)]["gpus"] for d in range(len(DPS))])
        style = {"color": common.COLORS[label], "marker": "o", "label": label}
        ax_total.plot(DPS, tput / 1e3, **style)
        ax_gpu.plot(DPS, tput / gpus / 1e3, **style)
    steps = res[(0, 0)]["scenario"]["steps"]
    for ax in (ax_total, ax_gpu):
        ax.set_xscale("log", base=2)
        ax.set_xticks(DPS, [str(d) for d in DPS])
        ax.set_xlabel("data-parallel replicas DP (CP 8 each; P = min(8, DP))")
        ax.grid(alpha=0.3)
    ax_total.set_yscale("log", base=2)
    ax_total.yaxis.set_major_formatter(ScalarFormatter())
    ax_total.set_ylabel("throughput (thousand tokens/s, log scale)")
    ax_total.set_title("Cluster throughput")
    ax_gpu.set_ylabel("throughput per GPU (thousand tokens/s)")
    ax_gpu.set_title("Per-GPU throughput (scaling efficiency)")
    ax_gpu.legend()
    fig.suptitle(f"DP scaling at fixed GBS 32 x 1M tokens, Qwen3-30B-A3B, H200 RoCE "
                 f"({steps} step{'s' if steps > 1 else ''} per point)")
    return common.save(fig, opts, NAME)


if __name__ == "__main__":
    sys.exit(common.script_main(make, __doc__))
