"""Libra's prefill gain over SGLang as its expert predictor gets worse (accuracy 1.0 -> 0.1).

Scenario ``paper-moe-breakdown`` with ``balancer.accuracy`` forced (misses biased towards
popular experts, the default), against SGLang on the same seeds (the routing trace depends on
the seed, not the system). Study code: ``benchmarks/moe_accuracy_sweep.py``. Quick mode:
8 layers, 1 batch, four accuracies.
"""

from __future__ import annotations

import numpy as np

from libra_des.report.figures import outside_legend
from paper_figs import common
from paper_figs.libra_moe.systems import SCENARIO

NAME = "moe_accuracy"
TITLE = "Libra gain vs predictor accuracy"


def make(opts: common.FigOptions) -> common.Drawn:
    accuracies = opts.pick(
        (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1), (1.0, 0.7, 0.4, 0.1), (1.0, 0.5)
    )
    base = opts.pick(
        ["model.layers=8", "workload.batches=2"],
        ["model.layers=8", "workload.batches=1"],
        list(common.TINY_MOE),
    )
    sglang = common.sweep(
        opts, f"{NAME}/sglang", SCENARIO, [common.grid("balancer.policy", ["sglang"])], base
    )
    libra = common.sweep(
        opts,
        f"{NAME}/libra",
        SCENARIO,
        [common.grid("balancer.accuracy", accuracies)],
        [*base, "balancer.policy=libra"],
    )
    ref = sglang.values((0,), lambda r: r["prefill_tokens_per_s"])
    gain = (
        np.array(
            [
                libra.values((i,), lambda r: r["prefill_tokens_per_s"]) / ref - 1
                for i in range(len(accuracies))
            ]
        )
        * 100
    )
    waste = (
        np.array(
            [
                libra.values((i,), lambda r: r["replica_waste_fraction"])
                for i in range(len(accuracies))
            ]
        )
        * 100
    )
    fig, (ax_g, ax_w) = common.new_figure(2, width=5.2, height=4.0)
    common.seed_line(ax_g, accuracies, gain, marker="o", color=common.COLORS["Libra"],
                     label="Libra over SGLang")
    ax_g.axhline(0, color="k", lw=0.8, label="no gain")
    common.seed_line(ax_w, accuracies, waste, marker="s", color="#8c564b",
                     label="replicas that computed nothing")
    for ax in (ax_g, ax_w):
        ax.invert_xaxis()
        outside_legend(ax)
    common.label_axes(
        ax_g,
        "predictor accuracy (top-k agreement, forced)",
        "prefill throughput gain (%)",
        "Gain over SGLang",
    )
    common.label_axes(
        ax_w,
        "predictor accuracy (top-k agreement, forced)",
        "replica waste (% of replicas)",
        "Wasted replicas",
    )
    model = common.model_title("Qwen3-235B-A22B", libra.scenario, libra.layers)
    fig.suptitle(f"Libra with a forced predictor accuracy, {model}, 8x H200, 32 x 1024")
    rows = [
        {
            "accuracy": a,
            "gain_percent": g.mean(),
            "gain_percent_sd": s,
            "replica_waste_percent": w.mean(),
            "replica_waste_percent_sd": ws,
        }
        for a, g, s, w, ws in zip(accuracies, gain, common.seed_sd(gain), waste,
                                  common.seed_sd(waste), strict=True)
    ]
    return common.save(
        fig, opts, NAME, TITLE, common.caption(libra, opts, libra.fidelity), rows
    )
