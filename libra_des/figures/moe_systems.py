"""MoE prefill per system: throughput, time to first token, load imbalance and replica waste.

Scenario ``paper-moe-breakdown`` (Qwen3-235B-A22B on 8x H200 NVSwitch, sequence 1024, batch
32) under SGLang, EPLB, Lina, HarMoEny and Libra; one sweep feeds ``moe_breakdown`` and the
three figures here. Quick mode simulates 8 layers and 1 batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from libra_des.figures import common

SCENARIO = "paper-moe-breakdown.yaml"


def systems_study(opts: common.FigOptions) -> common.Study:
    base = opts.pick([], ["model.layers=8", "workload.batches=1"], list(common.TINY_MOE))
    axis = common.grid("balancer.policy", list(common.MOE_SYSTEMS))
    return common.sweep(opts, "moe-systems", SCENARIO, [axis], base)


def bar_figure(
    opts: common.FigOptions,
    name: str,
    title: str,
    ylabel: str,
    fn: Callable[[dict[str, Any]], float],
    key: str,
) -> common.Drawn:
    """One bar per system with seed error bars."""
    study = systems_study(opts)
    names = list(common.MOE_SYSTEMS.values())
    stats = np.array([study.stat((i,), fn) for i in range(len(names))])
    fig, (ax,) = common.new_figure(1, width=6.0, height=4.0)
    x = np.arange(len(names))
    ax.bar(
        x,
        stats[:, 0],
        yerr=common.spread(stats[:, 1]),
        capsize=3,
        color=[common.COLORS[n] for n in names],
    )
    for xi, v in zip(x, stats[:, 0], strict=True):
        ax.annotate(f"{v:.3g}", (xi, v), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, names)
    common.label_axes(ax, "system", ylabel, title)
    layers = study.first()["scenario"]["model"]["layers"]
    fig.suptitle(f"Qwen3-235B-A22B prefill, 8x H200, seq 1024 x batch 32 ({layers} layers)")
    rows = [{"system": n, key: m, f"{key}_sd": s} for n, (m, s) in zip(names, stats, strict=True)]
    return common.save(
        fig, opts, name, title, common.caption(study.scenario, opts, study.fidelity), rows
    )


class Throughput:
    NAME = "moe_throughput"
    TITLE = "MoE prefill throughput per system"

    @staticmethod
    def make(opts: common.FigOptions) -> common.Drawn:
        return bar_figure(
            opts,
            Throughput.NAME,
            Throughput.TITLE,
            "prefill throughput (thousand tokens/s)",
            lambda r: r["prefill_tokens_per_s"] / 1e3,
            "thousand_tokens_per_s",
        )


class Ttft:
    NAME = "moe_ttft"
    TITLE = "Time to first token per system"

    @staticmethod
    def make(opts: common.FigOptions) -> common.Drawn:
        return bar_figure(
            opts,
            Ttft.NAME,
            Ttft.TITLE,
            "mean time to first token (s)",
            lambda r: r["ttft_s"]["mean"],
            "ttft_mean_s",
        )


class Imbalance:
    NAME = "moe_imbalance"
    TITLE = "Expert-parallel load imbalance per system"

    @staticmethod
    def make(opts: common.FigOptions) -> common.Drawn:
        return bar_figure(
            opts,
            Imbalance.NAME,
            Imbalance.TITLE,
            "imbalance ratio (max GPU load / mean, mean over layers)",
            lambda r: r["imbalance_ratio"]["mean"],
            "imbalance_ratio_mean",
        )
