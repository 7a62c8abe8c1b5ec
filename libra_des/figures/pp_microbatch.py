"""Per-microbatch forward-time distribution under pipeline parallelism: Ulysses vs Libra.

Scenarios ``paper-pp-microbatch-{256k,1m}`` (DP 8 x PP 4, 8 microbatches per replica, 1F1B);
the result key ``microbatch_forward_s`` holds every first-stage forward op of every step.
The paper uses 15 iterations; quick mode runs 3.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from libra_des.figures import common

NAME = "pp_microbatch"
LABELS = ("Ulysses", "Libra Full")


def make(opts: common.FigOptions) -> Path:
    steps = 3 if opts.quick else 15
    fig, panels = common.dataset_panels(opts, NAME, "paper-pp-microbatch",
                                        [common.variant_axis(LABELS)], [f"steps={steps}"])
    for ax, data, res in panels:
        times = [np.array(res[(v,)]["microbatch_forward_s"]) for v in range(len(LABELS))]
        bins = np.linspace(min(t.min() for t in times), max(t.max() for t in times), 40)
        for label, t in zip(LABELS, times, strict=True):
            spread, cv = t.max() / np.median(t), t.std() / t.mean()
            # Fractions, not counts: Ulysses has one op per replica, Libra one per pool.
            color = common.COLORS[label]
            ax.hist(t, bins=bins, weights=np.full(t.size, 1 / t.size), histtype="stepfilled",
                    alpha=0.45, color=color, edgecolor=color, linewidth=1.2,
                    label=f"{label} (n={t.size}): CV {cv:.3f}, max/median {spread:.2f}")
        ax.set_xlabel("forward time of one microbatch on stage 0 (s)")
        ax.set_ylabel("fraction of forward ops")
        ax.set_title(f"{data.upper()}-token packed sequences")
        ax.legend(fontsize="small")
        ax.grid(alpha=0.3)
    fig.suptitle(f"Microbatch forward-time distribution, PP 4 x DP 8, {steps} iterations")
    return common.save(fig, opts, NAME)


if __name__ == "__main__":
    sys.exit(common.script_main(make, __doc__))
