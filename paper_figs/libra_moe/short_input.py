"""Short-input loss: Libra's gain over SGLang against tokens per request.

With short inputs MoE_local is too short to hide the CPU sharding and the replica copies, so
the gain shrinks (docs/model.md part B: it vanishes at 1K tokens); longer inputs cut TTFT more.
Scenario ``paper-moe-breakdown`` over ``workload.seq_len`` at batch 32 for SGLang and Libra.
Quick mode: 8 layers, 1 batch, three lengths.
"""

from __future__ import annotations

import numpy as np

from libra_des.report.figures import outside_legend
from paper_figs import common
from paper_figs.libra_moe.systems import SCENARIO

NAME = "moe_short_input"
TITLE = "Libra gain vs input length (short-input loss)"


def make(opts: common.FigOptions) -> common.Drawn:
    seqs = opts.pick((128, 256, 512, 1024, 2048, 4096), (256, 1024, 4096), (64, 128))
    base = opts.pick(
        ["model.layers=8", "workload.batches=1"],
        ["model.layers=8", "workload.batches=1"],
        list(common.TINY_MOE),
    )
    study = common.sweep(
        opts,
        NAME,
        SCENARIO,
        [
            common.grid("workload.seq_len", seqs),
            common.grid("balancer.policy", ["sglang", "libra"]),
        ],
        base,
    )

    def ratio(key: str, sub: str | None) -> np.ndarray:
        def get(r: dict[str, object]) -> float:
            v = r[key]
            return float(v[sub] if isinstance(v, dict) and sub else v)  # type: ignore[arg-type]

        return np.array(
            [study.values((i, 1), get) / study.values((i, 0), get) for i in range(len(seqs))]
        )

    gain = (ratio("prefill_tokens_per_s", None) - 1) * 100
    ttft = (1 - ratio("ttft_s", "mean")) * 100
    fig, (ax_g, ax_t) = common.new_figure(2, width=5.2, height=4.0)
    color = common.COLORS["Libra"]
    common.seed_line(ax_g, seqs, gain, marker="o", color=color, label="Libra over SGLang")
    common.seed_line(ax_t, seqs, ttft, marker="o", color=color, label="Libra vs SGLang")
    for ax in (ax_g, ax_t):
        ax.set_xscale("log", base=2)
        ax.set_xticks(seqs, [str(s) for s in seqs])
        ax.axhline(0, color="k", lw=0.8)
        outside_legend(ax)
    model = common.model_title("Qwen3-235B-A22B", study.scenario, study.layers)
    fig.suptitle(f"Libra against SGLang over input length, {model}, 8x H200, batch 32")
    common.label_axes(ax_g, "tokens per request", "prefill throughput gain (%)", "Throughput gain")
    common.label_axes(ax_t, "tokens per request", "TTFT reduction (%)", "Time to first token")
    rows = [
        {
            "seq_len": s,
            "gain_percent": g.mean(),
            "gain_percent_sd": gs,
            "ttft_reduction_percent": t.mean(),
            "ttft_reduction_percent_sd": ts,
        }
        for s, g, gs, t, ts in zip(seqs, gain, common.seed_sd(gain), ttft, common.seed_sd(ttft),
                                   strict=True)
    ]
    return common.save(
        fig, opts, NAME, TITLE, common.caption(study, opts, study.fidelity), rows
    )
