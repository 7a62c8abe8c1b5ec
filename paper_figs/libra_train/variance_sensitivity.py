"""Exposure of each balancer to runtime variance: step time over its noiseless step.

Reads the JSON of ``benchmarks/variance_sensitivity.py`` (run that first) and draws one panel
per knob the benchmark moved (one source at a time, and ``fleet``: all together). Not in
``libra-des figs`` (its data comes from the benchmark, minutes of work); run it on its own::

    python -m paper_figs.libra_train.variance_sensitivity --data runs/variance_sensitivity.json \\
        --out figs/
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from libra_des.report.figures import outside_legend
from paper_figs import common

NAME = "variance_sensitivity"
TITLE = "Step-time exposure to runtime variance per balancer"
LABELS = {"ulysses": "Ulysses", "wlb_llm": "WLB-LLM", "distca": "DistCA", "libra": "Libra Full"}
TITLES = {"noise_sigma": "per-op jitter sigma", "slow_gpu_fraction": "slow-GPU fraction (1.5x)",
          "failslow_rate": "fail-slow episodes per GPU-step (1.5x)",
          "gpu_speed_sigma": "persistent per-GPU speed sigma",
          "jitter_node_correlation": "node correlation of jitter",
          "node_episode_rate": "node episodes per node-step (1.5x)",
          "rack_episode_rate": "rack episodes per rack-step (1.5x)",
          "link_jitter_sigma": "per-transfer link jitter sigma",
          "link_episode_rate": "link degradation per link-step (2x)",
          "launch_gap_seconds": "host launch gap per layer (s)",
          "host_stall_rate": "host stalls (50 ms) per GPU-op",
          "fleet": "every fleet source (0 off, 1 on)"}


def make(data: dict[str, Any], out: Path) -> common.Drawn:
    knobs = data["knobs"]
    fig, axes = common.new_figure(len(knobs), width=4.4)
    rows = []
    for ax, (knob, series) in zip(axes, knobs.items(), strict=True):
        for policy, ratios in series["exposure"].items():
            label = LABELS.get(policy, policy)
            ax.plot(series["values"], ratios, marker="o", label=label,
                    color=common.COLORS.get(label))
            rows += [{"knob": knob, "value": v, "policy": label, "step_over_noiseless": r}
                     for v, r in zip(series["values"], ratios, strict=True)]
        common.label_axes(ax, TITLES.get(knob, knob), "step time / noiseless step time")
    outside_legend(axes[0])
    fig.suptitle(f"Variance exposure ({data['scenario']}, {data['seeds']} seeds per point)")
    text = (f"scenario {data['scenario']}; seeds {data['seeds']} per point; fidelity fast; "
            "data from benchmarks/variance_sensitivity.py")
    return common.save(fig, common.FigOptions(out), NAME, TITLE, text, rows)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=Path("runs/variance_sensitivity.json"))
    p.add_argument("--out", type=Path, default=Path("figs"))
    args = p.parse_args(argv)
    drawn = make(json.loads(args.data.read_text()), args.out)
    print(" ".join(str(f) for f in drawn.files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
