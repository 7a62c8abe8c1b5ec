"""Core-attention straggler latency (slowest worker per call), mean and max, per policy.

Scenarios ``paper-attention-microbench-{256k,1m}`` (attention only, synthetic KV heads, DP 16):
Ulysses, WLB-LLM, DistCA and the Libra ladder TAP / TAP+VRSP / Full. Quick mode: one step
(one GBS window of 128 sequences) instead of two.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from libra_des.figures import common

NAME = "attention_straggler"
LABELS = ("Ulysses", "WLB-LLM", "DistCA", "Libra TAP", "Libra TAP+VRSP", "Libra Full")


def make(opts: common.FigOptions) -> Path:
    base = ["steps=1"] if opts.quick else []
    fig, panels = common.dataset_panels(opts, NAME, "paper-attention-microbench",
                                        [common.variant_axis(LABELS)], base)
    x = np.arange(len(LABELS))
    for ax, data, res in panels:
        stats = [res[(v,)]["attention_straggler_s"] for v in range(len(LABELS))]
        means = np.array([s["mean"] for s in stats]) * 1e3
        maxes = np.array([s["max"] for s in stats]) * 1e3
        colors = [common.COLORS[lb] for lb in LABELS]
        ax.bar(x - 0.2, means, 0.4, color=colors, edgecolor="black", label="mean")
        ax.bar(x + 0.2, maxes, 0.4, color=colors, edgecolor="black", hatch="//", alpha=0.6,
               label="max")
        for xi, m in zip(x, means, strict=True):
            ax.annotate(f"{m:.1f}", (xi - 0.2, m), ha="center", va="bottom", fontsize=7)
        ax.set_xticks(x, LABELS, rotation=25, ha="right")
        ax.set_ylabel("slowest worker per attention call (ms, one layer)")
        ax.set_title(f"{data.upper()}-token sequences")
        ax.grid(axis="y", alpha=0.3)
        ax.set_ylim(top=maxes.max() * 1.3)  # headroom for the legend
        ax.legend(title="over the window's calls", loc="upper left", ncols=2)
    steps = 1 if opts.quick else 2
    fig.suptitle(f"Core-attention straggler latency, DP 16, GBS 128 ({steps} window"
                 f"{'s' if steps > 1 else ''})")
    return common.save(fig, opts, NAME)


if __name__ == "__main__":
    sys.exit(common.script_main(make, __doc__))
