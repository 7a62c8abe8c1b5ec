"""Throughput as DP grows 1 -> 16 at a fixed GBS, every baseline and the Libra ladder.

Scenario ``paper-dp-scaling-1m`` (GBS 32 packed 1M-token sequences, CP 8, Qwen3-30B-A3B); the
pool size follows P = min(8, DP) because P must divide DP. Left: cluster throughput with the
ideal line (linear from the best DP = 1 point). Right: scaling efficiency, throughput over
DP x the same variant's DP = 1 throughput (ideal = 1). Quick mode: one step per point.
"""

from __future__ import annotations

import numpy as np

from libra_des.report.figures import outside_legend
from paper_figs import common

NAME = "dp_scaling"
TITLE = "DP scaling at fixed GBS with an ideal line"


def make(opts: common.FigOptions) -> common.Drawn:
    dps = opts.pick((1, 2, 4, 8, 16), (1, 2, 4, 8, 16), (1, 2))
    labels = opts.pick(common.ALL_VARIANTS, common.ALL_VARIANTS, ("Ulysses", "Libra Full"))
    dp_axis = common.zipped(
        {"parallelism.dp": dps, "balancer.pool_size": [min(8, dp) for dp in dps]}
    )
    # At DP 1 the experts' optimizer states are not sharded (their ZeRO group is DP) and a
    # GPU needs about 133 GiB: simulate anyway and let result.json flag it (oom: true).
    base = ["memory.check=warn", *opts.pick([], ["steps=1"],
                                            [*common.TINY_TRAINING, "parallelism.gbs=2"])]
    study = common.sweep(
        opts, NAME, "paper-dp-scaling-1m.yaml", [common.variant_axis(labels), dp_axis], base
    )
    fig, (ax_total, ax_eff) = common.new_figure(2, width=5.6)
    rows = []
    one = max(study.stat((v, 0), lambda r: r["tokens_per_s"])[0] for v in range(len(labels)))
    for v, label in enumerate(labels):
        stats = [study.stat((v, d), lambda r: r["tokens_per_s"]) for d in range(len(dps))]
        mean, err = np.array(stats).T
        eff, eff_err = mean / (np.array(dps) * mean[0]), err / (np.array(dps) * mean[0])
        style = {"color": common.COLORS[label], "marker": "o", "label": label, "capsize": 3}
        ax_total.errorbar(dps, mean / 1e3, yerr=common.spread(err / 1e3), **style)
        ax_eff.errorbar(dps, eff, yerr=common.spread(eff_err), **style)
        rows += [
            {
                "variant": label,
                "dp": dp,
                "tokens_per_s": m,
                "tokens_per_s_sd": e,
                "scaling_efficiency": f,
                "scaling_efficiency_sd": fe,
            }
            for dp, m, e, f, fe in zip(dps, mean, err, eff, eff_err, strict=True)
        ]
    ideal = one * np.array(dps)
    ax_total.plot(dps, ideal / 1e3, "k--", label="ideal (linear from best DP = 1)")
    ax_eff.axhline(1.0, color="k", ls="--", label="ideal")
    rows += [
        {"variant": "ideal", "dp": dp, "tokens_per_s": i} for dp, i in zip(dps, ideal, strict=True)
    ]
    for ax in (ax_total, ax_eff):
        ax.set_xscale("log", base=2)
        ax.set_xticks(dps, [str(d) for d in dps])
    common.label_axes(
        ax_total,
        "data-parallel replicas DP (CP 8 each; P = min(8, DP))",
        "throughput (thousand tokens/s)",
        "Cluster throughput",
    )
    common.label_axes(
        ax_eff,
        "data-parallel replicas DP",
        "scaling efficiency (1 = ideal)",
        "Throughput / (DP x own DP = 1 throughput)",
    )
    outside_legend(ax_total)
    model = common.model_title("Qwen3-30B-A3B", study.scenario, study.layers)
    fig.suptitle(f"DP scaling at fixed GBS 32 x 1M tokens, {model}, H200 RoCE")
    text = common.caption(study, opts, study.fidelity)
    return common.save(fig, opts, NAME, TITLE, text, rows)
