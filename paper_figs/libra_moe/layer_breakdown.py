"""MoE prefill layer breakdown per system: exposed stages stacked, hidden work beside them.

Scenario ``paper-moe-breakdown`` (Qwen3-235B-A22B on 8x H200, sequence 1024, batch 32) for
SGLang, EPLB, Lina, HarMoEny and Libra; ``layer_breakdown_s`` holds, per stage, the time on
the critical path (exposed) and the time overlapped with other work (hidden), per layer.
"""

from __future__ import annotations

import numpy as np

from libra_des.report.figures import STAGES
from paper_figs import common
from paper_figs.libra_moe.systems import systems_study

NAME = "moe_breakdown"
TITLE = "MoE layer breakdown per system"
def make(opts: common.FigOptions) -> common.Drawn:
    from matplotlib import colormaps

    study = systems_study(opts)
    names = list(common.MOE_SYSTEMS.values())
    breakdowns = [[r["layer_breakdown_s"] for r in study.runs[(i,)]] for i in range(len(names))]
    found = {s for runs in breakdowns for b in runs for s in b}
    stages = [s for s in STAGES if s in found] + sorted(found.difference(STAGES))
    colors = colormaps["tab10"](np.linspace(0, 1, 10))
    fig, (ax_e, ax_h) = common.new_figure(2, width=5.8, height=4.0)
    y = np.arange(len(names))
    rows = []
    for kind, ax in (("exposed", ax_e), ("hidden", ax_h)):
        left = np.zeros(len(names))
        for k, stage in enumerate(stages):
            ms = (
                np.array(
                    [
                        np.mean([b.get(stage, {}).get(kind, 0.0) for b in runs])
                        for runs in breakdowns
                    ]
                )
                * 1e3
            )
            ax.barh(y, ms, left=left, color=colors[k % 10], label=STAGES.get(stage, stage))
            left += ms
            rows += [
                {"system": n, "kind": kind, "stage": STAGES.get(stage, stage), "ms": v}
                for n, v in zip(names, ms, strict=True)
            ]
        for yi, total in zip(y, left, strict=True):
            ax.annotate(f" {total:.2f}", (total, yi), va="center", fontsize=8)
        ax.set_yticks(y, names)
        ax.invert_yaxis()
        ax.set_xlim(right=max(left.max(), 1e-6) * 1.2)
        ax.grid(axis="x", alpha=0.3)
    ax_e.set_xlabel("critical-path time per layer (ms)")
    ax_e.set_title("Exposed stages (sum = MoE layer time)")
    ax_h.set_xlabel("overlapped time per layer (ms)")
    ax_h.set_title("Hidden work (off the critical path)")
    ax_h.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.0, 0.5), title="stage")
    layers = study.first()["scenario"]["model"]["layers"]
    fig.suptitle(
        f"MoE prefill layer breakdown, Qwen3-235B-A22B, 8x H200, seq 1024 x batch 32 "
        f"({layers} layers; mean over seeds)"
    )
    return common.save(
        fig, opts, NAME, TITLE, common.caption(study.scenario, opts, study.fidelity), rows
    )
