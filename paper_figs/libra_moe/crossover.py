"""Where Libra's balancing gain vanishes: its gain against batch size and input length.

Libra's gain over SGLang and over EPLB (the static-replication baseline) on a grid of
``workload.batch`` x ``workload.seq_len``, from the mechanisms alone: with fewer tokens per
GPU, MoE_local (the window that hides sharding, metadata and the replica copies) shrinks
while the copies of N expert slots and the planning's fixed part do not, and the expert
GEMMs become weight-read bound so balancing the tokens saves less. Scenario
``paper-moe-breakdown``. Quick mode: 8 layers, 1 batch, a 2 x 2 grid.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from libra_des import api
from libra_des.report.figures import text_colour
from paper_figs import common
from paper_figs.libra_moe.systems import SCENARIO

NAME = "moe_crossover"
TITLE = "Libra gain vs batch size and input length (crossover)"
SYSTEMS = ("sglang", "eplb", "libra")


def make(opts: common.FigOptions) -> common.Drawn:
    batches = opts.pick((1, 4, 16, 32), (4, 32), (2, 4))
    seqs = opts.pick((256, 1024, 4096), (256, 2048), (64, 128))
    base = opts.pick(
        ["model.layers=8", "workload.batches=1"],
        ["model.layers=8", "workload.batches=1"],
        [s for s in common.TINY_MOE if not s.startswith(("workload.batch=", "workload.seq"))],
    )
    study = common.sweep(
        opts, NAME, SCENARIO,
        [common.grid("workload.batch", batches), common.grid("workload.seq_len", seqs),
         common.grid("balancer.policy", list(SYSTEMS))],
        base,
    )

    def tput(r: dict[str, Any]) -> float:
        return float(r["prefill_tokens_per_s"])

    gain = {
        other: np.array([[(study.values((b, s, 2), tput) / study.values((b, s, j), tput) - 1)
                          * 100 for s in range(len(seqs))] for b in range(len(batches))])
        for j, other in enumerate(SYSTEMS[:2])
    }
    fig, axes = common.new_figure(2, width=5.4, height=4.2)
    for ax, (other, g) in zip(axes, gain.items(), strict=True):
        mean = g.mean(axis=-1)  # over seeds
        lim = max(float(np.abs(mean).max()), 1.0)
        im = ax.imshow(mean, cmap="RdBu", vmin=-lim, vmax=lim, origin="lower", aspect="auto")
        for b in range(len(batches)):
            for s in range(len(seqs)):
                ax.text(s, b, f"{mean[b, s]:+.0f}", ha="center", va="center", fontsize="small",
                        color=text_colour(im.cmap(im.norm(mean[b, s]))))
        ax.set_xticks(range(len(seqs)), [str(s) for s in seqs])
        ax.set_yticks(range(len(batches)), [str(b) for b in batches])
        fig.colorbar(im, ax=ax, label="throughput gain (%)")
        common.label_axes(ax, "tokens per request", "requests per batch",
                          f"Libra over {api.moe_systems()[other]}")
    model = common.model_title("Qwen3-235B-A22B", study.scenario, study.layers)
    fig.suptitle(f"Libra's prefill gain, {model}, 8x H200 (0: the gain has vanished)")
    rows = [
        {"batch": b, "seq_len": s,
         "gain_over_sglang_percent": gain["sglang"][i, j].mean(),
         "gain_over_eplb_percent": gain["eplb"][i, j].mean()}
        for i, b in enumerate(batches) for j, s in enumerate(seqs)
    ]
    return common.save(
        fig, opts, NAME, TITLE, common.caption(study, opts, study.fidelity), rows
    )
