"""Exposure of each balancer to runtime variance: step time over its noiseless step.

Reads the JSON of ``benchmarks/variance_sensitivity.py`` (run that first) and draws one panel
per knob (noise sigma, slow-GPU fraction, fail-slow rate).

    python -m paper_figs.variance_sensitivity --data runs/variance_sensitivity.json --out figs/
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from paper_figs import common

NAME = "variance_sensitivity"
LABELS = {"ulysses": "Ulysses", "wlb_llm": "WLB-LLM", "distca": "DistCA", "libra": "Libra Full"}
TITLES = {"noise_sigma": "per-op jitter sigma", "slow_gpu_fraction": "slow-GPU fraction (1.5x)",
          "failslow_rate": "fail-slow episodes per GPU-step (1.5x)"}


def make(data: dict, out: Path) -> Path:
    knobs = data["knobs"]
    fig, axes = common.new_figure(len(knobs), width=4.4)
    for ax, (knob, series) in zip(axes, knobs.items(), strict=True):
        for policy, ratios in series["exposure"].items():
            label = LABELS.get(policy, policy)
            ax.plot(series["values"], ratios, marker="o", label=label,
                    color=common.COLORS.get(label))
        ax.set_xlabel(TITLES.get(knob, knob))
        ax.set_ylabel("step time / noiseless step time")
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle(f"Variance exposure ({data['scenario']}, {data['seeds']} seeds per point)")
    return common.save(fig, common.FigOptions(out), NAME)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=Path("runs/variance_sensitivity.json"))
    p.add_argument("--out", type=Path, default=Path("figs"))
    args = p.parse_args(argv)
    print(make(json.loads(args.data.read_text()), args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
