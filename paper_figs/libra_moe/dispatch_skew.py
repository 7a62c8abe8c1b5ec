"""AllGather vs All2All dispatch per fabric: where Libra's AllGather stops paying off.

Scenario ``paper-moe-breakdown`` on one NVSwitch node (EP 8), two nodes over 400G RoCE
(EP 16) and a PCIe Gen4 box (EP 8; GPU set to H200-NVL so the model fits, compute still the
H200 SXM profile): Libra with AllGather, Libra with All2All, and SGLang's All2All. Study code:
``benchmarks/moe_topology_study.py``. Quick mode: 6 layers, 1 batch.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from libra_des.report.figures import outside_legend
from paper_figs import common
from paper_figs.libra_moe.systems import SCENARIO

NAME = "moe_dispatch"
TITLE = "AllGather vs All2All dispatch per fabric"
FABRICS: dict[str, dict[str, object]] = {
    "NVSwitch, 1 node": {
        "topology": "h200-8x-nvswitch",
        "topology_params": "{}",
        "parallelism.ep": 8,
    },
    "RoCE 400G, 2 nodes": {
        "topology": "h200-roce-railopt",
        "topology_params": "{nodes: 2}",
        "parallelism.ep": 16,
    },
    "PCIe Gen4, 1 box": {
        "topology": "pcie-8x",
        "topology_params": "{gpu: H200-NVL}",
        "parallelism.ep": 8,
    },
}
DISPATCH: dict[str, dict[str, object]] = {
    "Libra, AllGather": {"balancer.policy": "libra", "balancer.dispatch": "allgather"},
    "Libra, All2All": {"balancer.policy": "libra", "balancer.dispatch": "all2all"},
    "SGLang, All2All": {"balancer.policy": "sglang", "balancer.dispatch": "all2all"},
}
DISPATCH_COLORS = ("#d62728", "#ff9896", "#7f7f7f")


def axis(table: Mapping[str, Mapping[str, object]]) -> common.Axis:
    return common.zipped(
        {k: [row[k] for row in table.values()] for k in next(iter(table.values()))}
    )


def make(opts: common.FigOptions) -> common.Drawn:
    fabrics = opts.pick(list(FABRICS), list(FABRICS), ["NVSwitch, 1 node"])
    base = opts.pick(
        ["model.layers=6", "workload.batches=1"],
        ["model.layers=6", "workload.batches=1"],
        list(common.TINY_MOE),
    )
    study = common.sweep(
        opts, NAME, SCENARIO, [axis({f: FABRICS[f] for f in fabrics}), axis(DISPATCH)], base
    )
    fig, (ax,) = common.new_figure(1, width=7.0, height=4.2)
    x = np.arange(len(fabrics))
    width = 0.8 / len(DISPATCH)
    rows = []
    for k, (name, color) in enumerate(zip(DISPATCH, DISPATCH_COLORS, strict=True)):
        stats = np.array(
            [study.stat((f, k), lambda r: r["moe_layer_s"] * 1e3) for f in range(len(fabrics))]
        )
        ax.bar(
            x + (k - 1) * width,
            stats[:, 0],
            width,
            yerr=common.spread(stats[:, 1]),
            color=color,
            capsize=3,
            label=name,
        )
        rows += [
            {"fabric": fb, "system": name, "moe_layer_ms": m, "moe_layer_ms_sd": s}
            for fb, (m, s) in zip(fabrics, stats, strict=True)
        ]
    ax.set_xticks(x, fabrics)
    common.label_axes(
        ax,
        "fabric (expert-parallel group)",
        "MoE layer time (ms)",
        "Dispatch collective per fabric, seq 1024 x batch 32",
    )
    outside_legend(ax)
    return common.save(
        fig, opts, NAME, TITLE, common.caption(study, opts, study.fidelity), rows
    )
