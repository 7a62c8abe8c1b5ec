"""MoE prefill layer breakdown per system: exposed stages stacked, hidden work beside them.

Scenario ``paper-moe-breakdown`` (Qwen3-235B-A22B on 8x H200, sequence 1024, batch 32) for
SGLang, EPLB, Lina, HarMoEny and Libra; ``layer_breakdown_s`` holds, per stage, the time on
the critical path (exposed) and the time overlapped with other work (hidden), per layer.
Every stage is drawn: beyond the palette's colours the smallest are summed as "other".
"""

from __future__ import annotations

import numpy as np

from libra_des.report.figures import PALETTE, STAGES, outside_legend, top_parts
from paper_figs import common
from paper_figs.libra_moe.systems import systems_study

NAME = "moe_breakdown"
TITLE = "MoE layer breakdown per system"
def make(opts: common.FigOptions) -> common.Drawn:
    study = systems_study(opts)
    names = list(common.MOE_SYSTEMS.values())
    breakdowns = [[r["layer_breakdown_s"] for r in study.runs[(i,)]] for i in range(len(names))]
    found = {s for runs in breakdowns for b in runs for s in b}
    stages = [s for s in STAGES if s in found] + sorted(found.difference(STAGES))
    kinds = ("exposed", "hidden")
    # Per stage: ms per layer for each (kind, system); the smallest stages (over both panels)
    # share one 'other' part once there are more stages than colours, so bars keep totals.
    ms = {STAGES.get(s, s.replace("_", " ")): [
        float(np.mean([b.get(s, {}).get(kind, 0.0) for b in runs])) * 1e3
        for kind in kinds for runs in breakdowns] for s in stages}
    parts = top_parts(ms)
    fig, (ax_e, ax_h) = common.new_figure(2, width=5.8, height=4.0)
    y = np.arange(len(names))
    rows = []
    for j, (kind, ax) in enumerate(zip(kinds, (ax_e, ax_h), strict=True)):
        left = np.zeros(len(names))
        for k, (stage, values) in enumerate(parts.items()):
            v = np.array(values[j * len(names):(j + 1) * len(names)])
            ax.barh(y, v, left=left, color=PALETTE[k], label=stage)
            left += v
            rows += [{"system": n, "kind": kind, "stage": stage, "ms": x}
                     for n, x in zip(names, v, strict=True)]
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
    outside_legend(ax_h, title="stage")
    model = common.model_title("Qwen3-235B-A22B", study.scenario, study.layers)
    fig.suptitle(f"MoE prefill layer breakdown (per layer), {model}, 8x H200, "
                 "seq 1024 x batch 32 (mean over seeds)")
    return common.save(
        fig, opts, NAME, TITLE, common.caption(study, opts, study.fidelity), rows
    )
