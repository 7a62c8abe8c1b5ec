"""MoE prefill layer breakdown per system: exposed stages stacked, hidden work beside them.

Scenario ``paper-moe-breakdown`` (Qwen3-235B-A22B on 8x H200, sequence 1024, batch 32) for
SGLang, EPLB, Lina, HarMoEny and Libra; ``layer_breakdown_s`` holds, per stage, the time on
the critical path (exposed) and the time overlapped with other work (hidden), per layer.
Optional: skipped when the scenario is absent. Quick mode simulates 8 layers and 1 batch.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from matplotlib import colormaps

from libra_des.figures import common

NAME = "moe_breakdown"
SCENARIO = "paper-moe-breakdown.yaml"
SYSTEMS = {"sglang": "SGLang", "eplb": "EPLB", "lina": "Lina", "harmoeny": "HarMoEny",
           "libra": "Libra"}
#: Stages in execution order (result files sort their keys); unknown stages go last.
ORDER = ("attention", "gate", "prediction", "replica_copy", "dispatch", "moe_local",
         "sharding_cpu", "metadata", "moe_remote", "combine")


class FigureSkipped(RuntimeError):
    """The figure's input is not available in this checkout."""


def make(opts: common.FigOptions) -> Path:
    if not (common.SCENARIOS / SCENARIO).is_file():
        raise FigureSkipped(f"scenarios/{SCENARIO} is absent")
    base = ["model.layers=8", "workload.batches=1"] if opts.quick else []
    axis = common.grid("balancer.policy", list(SYSTEMS))
    res = common.by_coords(common.sweep(opts, f"{NAME}/qwen3", SCENARIO, [axis], base))
    breakdowns = [res[(i,)]["layer_breakdown_s"] for i in range(len(SYSTEMS))]
    found = {s for b in breakdowns for s in b}
    stages = [s for s in ORDER if s in found] + sorted(found.difference(ORDER))
    colors = colormaps["tab10"](np.linspace(0, 1, 10))
    fig, (ax_e, ax_h) = common.new_figure(2, width=5.8, height=4.0)
    y = np.arange(len(SYSTEMS))
    for kind, ax in (("exposed", ax_e), ("hidden", ax_h)):
        left = np.zeros(len(SYSTEMS))
        for k, stage in enumerate(stages):
            ms = np.array([b.get(stage, {}).get(kind, 0.0) for b in breakdowns]) * 1e3
            ax.barh(y, ms, left=left, color=colors[k % 10], label=stage)
            left += ms
        for yi, total in zip(y, left, strict=True):
            ax.annotate(f" {total:.2f}", (total, yi), va="center", fontsize=8)
        ax.set_yticks(y, list(SYSTEMS.values()))
        ax.invert_yaxis()
        ax.set_xlim(right=left.max() * 1.15)
        ax.grid(axis="x", alpha=0.3)
    ax_e.set_xlabel("critical-path time per layer (ms)")
    ax_e.set_title("Exposed stages (sum = MoE layer time)")
    ax_h.set_xlabel("overlapped time per layer (ms)")
    ax_h.set_title("Hidden work (off the critical path)")
    ax_h.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.0, 0.5), title="stage")
    layers = res[(0,)]["scenario"]["model"]["layers"]
    fig.suptitle(f"MoE prefill layer breakdown, Qwen3-235B-A22B, 8x H200, seq 1024 x batch 32 "
                 f"({layers} layers)")
    return common.save(fig, opts, NAME)


if __name__ == "__main__":
    sys.exit(common.script_main(make, __doc__))
