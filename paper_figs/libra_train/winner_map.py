"""Where the winner flips: each baseline's attention straggler over Libra Full's, on a grid.

Scenarios ``paper-attention-microbench-{256k,1m}`` (core attention only, DP 16 x CP 4, P = 8,
GBS 128). The metric is the training paper's own for this microbenchmark: the core-attention
straggler latency, the slowest worker of each forward attention call, averaged over the GBS
window (``attention_straggler_s.mean``). A cell is ``baseline / Libra Full``: above 1 Libra is
faster there, below 1 the baseline is. Rows are the baselines (Ulysses, WLB-LLM, DistCA, per
corpus); columns are factor pairs, each varied by scenario overrides only:

* the corpus tail: the law's p99 (see :func:`stretched_knots`) and its hard ``max``;
* the NVLink domain (GPUs per node, one NIC per GPU kept) and the NIC line rate;
* the leaf-level oversubscription and the leaf group size (nodes under one leaf: with all 8
  nodes under one leaf no transfer crosses the oversubscribed uplinks);
* runtime variance: per-op jitter ``variance.noise_sigma`` and persistent per-GPU speed
  ``variance.gpu_speed_sigma``.

Every other factor stays as the scenario ships it. Modes: *full* is the scenario as shipped
(2 steps, 48 layers) over three seeds; *quick* is one step of 2 layers, one seed and smaller
grids, which the subtitle and every CSV row say; *tiny* (tests) is the tiny layout.
``libra-des figs`` draws both corpora in full mode and the 1M one in quick mode; the other
corpus in quick mode, on its own::

    python -m paper_figs.libra_train.winner_map --quick --dataset 256k --out figs-256k/
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from libra_des import api
from libra_des.report.figures import text_colour
from paper_figs import common

if TYPE_CHECKING:
    from matplotlib.colors import Colormap, Normalize

NAME = "winner_map"
TITLE = "Where the winner flips: baseline / Libra Full attention straggler"
BASELINES = ("Ulysses", "WLB-LLM", "DistCA")
LIBRA = "Libra Full"
METRIC = "attention_straggler_s.mean"
#: The split between the law's lognormal body and its borrowed tail (docs/workloads.md).
SPLIT = 0.99


@dataclass(frozen=True)
class Factor:
    """One varied factor: its label, the numbers it takes (as written in the CSV) and the
    overrides that set each of them (one list of ``--set`` keys and values per number)."""

    label: str
    values: tuple[float, ...]
    ticks: tuple[str, ...]
    overrides: tuple[dict[str, Any], ...]
    #: The value the scenario ships with (its cell is outlined), or None off this grid.
    shipped: float | None = None

    def axis(self) -> common.Axis:
        keys = list(dict.fromkeys(k for o in self.overrides for k in o))
        return common.zipped({k: [o[k] for o in self.overrides] for k in keys})


@dataclass(frozen=True)
class Pair:
    """One column of the figure: factor ``y`` down the heat map, ``x`` across it."""

    name: str
    title: str
    y: Factor
    x: Factor


def tokens(n: float) -> str:
    return f"{n / 1024:.0f}K" if n < 1 << 20 else f"{n / (1 << 20):g}M"


def stretched_knots(knots: Sequence[Sequence[float]], factor: float) -> list[list[float]]:
    """The shipped paper law with its p99 multiplied by ``factor``, median and tail shape kept.

    The paper laws are a lognormal body through the published median and p99, and above
    p99 a public corpus's tail rescaled to that p99 (``rescaled_tail_knots``). A new p99 gives
    the body ``sigma' = gamma sigma`` with ``gamma = ln(p99'/median) / ln(p99/median)``, so
    every body knot maps to ``median (l / median)^gamma``, and the tail knots scale by
    ``factor``: the law ``rescaled_tail_knots`` would build for that p99 (up to rounding to
    0.1 token). The first knot stays one token (the laws' assumption).
    """
    probs = np.array([k[0] for k in knots])
    lengths = np.array([k[1] for k in knots], dtype=np.float64)
    median = float(np.exp(np.interp(0.5, probs, np.log(lengths))))
    p99 = float(np.exp(np.interp(SPLIT, probs, np.log(lengths))))
    gamma = math.log(p99 * factor / median) / math.log(p99 / median)
    body = probs <= SPLIT
    out = np.where(body, median * (lengths / median) ** gamma, lengths * factor)
    out[0] = min(lengths[0], out[1])
    out = np.maximum.accumulate(np.round(out, 1))
    return [[float(p), float(q)] for p, q in zip(probs, out, strict=True)]


def pairs(dataset: str, mode: str) -> tuple[Pair, ...]:
    """The factor pairs at this mode's grid size (full: 3-4 values a factor; quick: 2-3 of
    them, the shipped value among them; tiny: two)."""
    sc = api.load_training(common.SCENARIOS / f"paper-attention-microbench-{dataset}.yaml",
                           (), "the winner map compares training balancers")
    law = sc.workload.lengths
    assert law is not None and law.max is not None  # a training scenario's corpus law
    knots, cap = law.knots, law.max

    def pick(full: Sequence[Any], quick: Sequence[Any]) -> Sequence[Any]:
        return full if mode == "full" else quick

    p99 = float(np.exp(np.interp(SPLIT, [k[0] for k in knots], np.log([k[1] for k in knots]))))
    stretch = pick((0.5, 1.0, 2.0), (0.5, 1.0, 2.0) if mode == "quick" else (0.5, 2.0))
    caps = pick((8, 4, 2, 1), (8, 2, 1) if mode == "quick" else (8, 1))
    domain = pick((4, 8, 16), (4, 8, 16) if mode == "quick" else (4, 16))
    nic = pick((100, 200, 400, 800), (100, 400))
    oversub = pick((1, 2, 4), (1, 4))
    leaf = pick((1, 2, 4, 8), (1, 8))
    jitter = pick((0.0, 0.0115, 0.023, 0.046), (0.0, 0.0115, 0.046) if mode == "quick"
                  else (0.0, 0.046))
    speed = pick((0.0, 0.013, 0.026), (0.0, 0.026))
    return (
        Pair("tail", "corpus tail",
             Factor("law p99 (tokens)", tuple(p99 * s for s in stretch),
                    tuple(f"{p99 * s:,.0f}" for s in stretch),
                    tuple({"workload.lengths.knots": stretched_knots(knots, s)}
                          for s in stretch), p99),
             Factor("law max (tokens)", tuple(cap // c for c in caps),
                    tuple(tokens(cap // c) for c in caps),
                    tuple({"workload.lengths.max": cap // c} for c in caps), cap)),
        Pair("nvlink_nic", "NVLink domain x NIC rate",
             Factor("GPUs per NVLink domain", tuple(map(float, domain)), tuple(map(str, domain)),
                    tuple({"topology_params.gpus_per_node": g, "topology_params.levels.0.nics": g}
                          for g in domain), 8.0),
             Factor("NIC line rate (Gb/s)", tuple(map(float, nic)), tuple(map(str, nic)),
                    tuple({"topology_params.levels.1.bandwidth": f"{b}Gb/s"} for b in nic),
                    400.0)),
        Pair("oversubscription", "leaf oversubscription",
             Factor("leaf uplink oversubscription", tuple(map(float, oversub)),
                    tuple(f"{o}:1" for o in oversub),
                    tuple({"topology_params.levels.1.oversubscription": o} for o in oversub),
                    1.0),
             Factor("nodes per leaf group", tuple(map(float, leaf)), tuple(map(str, leaf)),
                    tuple({"topology_params.levels.1.fan_out": n} for n in leaf), 8.0)),
        Pair("noise", "runtime variance",
             Factor("per-op jitter sigma", tuple(jitter), tuple(f"{s:g}" for s in jitter),
                    tuple({"variance.noise_sigma": s} for s in jitter), 0.0115),
             Factor("per-GPU speed sigma", tuple(speed), tuple(f"{s:g}" for s in speed),
                    tuple({"variance.gpu_speed_sigma": s} for s in speed), 0.0)),
    )


def reduction(opts: common.FigOptions) -> str:
    """What this mode changed from the shipped scenario (said in the subtitle and the CSV)."""
    return opts.pick(
        "none (scenario as shipped: 2 steps, 48 layers; 3 seeds)",
        "reduced: 1 step, 2 layers, 1 seed (shipped: 2 steps, 48 layers, 3 seeds)",
        "tiny test layout (DP 2, CP 4, 2 layers, 1 step; numbers mean nothing)",
    )


def base_overrides(opts: common.FigOptions) -> list[str]:
    return opts.pick([], ["steps=1", "model.layers=2"],
                     [*common.TINY_TRAINING, "parallelism.cp=4"])


def winner(ratio: float) -> str:
    return "tie" if ratio == 1 else ("Libra" if ratio > 1 else "baseline")


def collect(opts: common.FigOptions, dataset: str, chosen: Sequence[Pair]) -> list[dict[str, Any]]:
    """One CSV row per (pair, y, x, baseline) cell: both stragglers (mean over seeds), their
    ratio baseline / Libra Full and the winner; the step-time ratio of the same runs too."""
    labels = (*BASELINES, LIBRA)
    rows = []
    for pair in chosen:
        study = common.sweep(
            opts, f"{NAME}/{dataset}/{pair.name}", f"paper-attention-microbench-{dataset}.yaml",
            [common.variant_axis(labels), pair.y.axis(), pair.x.axis()], base_overrides(opts))
        for i, (yv, yt) in enumerate(zip(pair.y.values, pair.y.ticks, strict=True)):
            for j, (xv, xt) in enumerate(zip(pair.x.values, pair.x.ticks, strict=True)):
                libra = study.values((len(BASELINES), i, j),
                                     lambda r: r["attention_straggler_s"]["mean"]).mean()
                libra_step = study.values((len(BASELINES), i, j),
                                          lambda r: r["step_time_s"]["mean"]).mean()
                for b, name in enumerate(BASELINES):
                    base = study.values((b, i, j),
                                        lambda r: r["attention_straggler_s"]["mean"]).mean()
                    step = study.values((b, i, j), lambda r: r["step_time_s"]["mean"]).mean()
                    ratio = float(base / libra)
                    rows.append({
                        "dataset": dataset, "pair": pair.name,
                        "y_factor": pair.y.label, "y_value": yv, "y_tick": yt,
                        "x_factor": pair.x.label, "x_value": xv, "x_tick": xt,
                        "baseline": name, "metric": METRIC,
                        "baseline_ms": float(base) * 1e3, "libra_ms": float(libra) * 1e3,
                        "ratio": ratio,
                        "as_shipped": yv == pair.y.shipped and xv == pair.x.shipped,
                        "winner": name if winner(ratio) == "baseline" else winner(ratio),
                        "step_ratio": float(step / libra_step),
                        "mode": opts.mode, "fidelity": study.fidelity,
                        "reduction": reduction(opts),
                        "seeds": len(opts.seeds)})
    return rows


def draw_cell(ax: Any, pair: Pair, ratios: np.ndarray, cmap: Colormap, norm: Normalize) -> Any:
    """One annotated heat map of log2(ratio); the scenario-as-shipped cell outlined."""
    from matplotlib.patches import Rectangle

    image = ax.imshow(np.log2(ratios), cmap=cmap, norm=norm, aspect="auto", origin="lower")
    for (i, j), r in np.ndenumerate(ratios):
        ax.text(j, i, f"{r:.2f}", ha="center", va="center", fontsize=8,
                color=text_colour(cmap(norm(float(np.log2(r))))))
    ax.set_xticks(range(len(pair.x.ticks)), pair.x.ticks, fontsize=8)
    ax.set_yticks(range(len(pair.y.ticks)), pair.y.ticks, fontsize=8)
    if pair.y.shipped in pair.y.values and pair.x.shipped in pair.x.values:
        i, j = pair.y.values.index(pair.y.shipped), pair.x.values.index(pair.x.shipped)
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="black",
                               linewidth=2.0, linestyle="--"))
    return image


def draw(opts: common.FigOptions, datasets: Sequence[str],
         chosen: dict[str, tuple[Pair, ...]], rows: list[dict[str, Any]]) -> common.Drawn:
    from matplotlib import colormaps
    from matplotlib.colors import TwoSlopeNorm
    from matplotlib.figure import Figure

    ncols = len(next(iter(chosen.values())))
    nrows = len(BASELINES) * len(datasets)
    fig = Figure(figsize=(3.3 * ncols + 1.2, 2.5 * nrows + 1.0), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    span = max(0.25, float(np.abs(np.log2([r["ratio"] for r in rows])).max()))
    norm, cmap = TwoSlopeNorm(0.0, -span, span), colormaps["RdBu"]
    image: Any = None
    for d, dataset in enumerate(datasets):
        for c, pair in enumerate(chosen[dataset]):
            for b, name in enumerate(BASELINES):
                ax = axes[d * len(BASELINES) + b, c]
                cells = {(r["y_tick"], r["x_tick"]): r["ratio"] for r in rows
                         if (r["dataset"], r["pair"], r["baseline"]) == (dataset, pair.name, name)}
                ratios = np.array([[cells[(y, x)] for x in pair.x.ticks] for y in pair.y.ticks])
                image = draw_cell(ax, pair, ratios, cmap, norm)
                ax.set_xlabel(pair.x.label, fontsize=8)
                ax.set_ylabel(f"{dataset.upper()} vs {name}\n{pair.y.label}", fontsize=8)
                if b == 0 and d == 0:
                    ax.set_title(pair.title, fontsize=10)
    bar = fig.colorbar(image, ax=axes.ravel().tolist(), location="right", shrink=0.6)
    ticks = [t for t in (0.25, 0.5, 0.8, 1.0, 1.25, 2.0, 4.0) if abs(math.log2(t)) <= span]
    bar.set_ticks([math.log2(t) for t in ticks], labels=[f"{t:g}" for t in ticks])
    bar.set_label("baseline / Libra Full straggler (log scale)\n> 1 blue: Libra faster; "
                  "< 1 red: baseline faster")
    fig.suptitle("Where the winner flips: core-attention straggler (mean slowest worker per "
                 f"call), baseline / Libra Full; dashed box: the scenario as shipped\n"
                 f"{reduction(opts)}", fontsize=10)
    scenario = "paper-attention-microbench-{" + ",".join(datasets) + "}"
    text = common.caption(scenario, opts, str(rows[0]["fidelity"]),
                          f"metric {METRIC}; {reduction(opts)}; other factors as shipped")
    return common.save(fig, opts, NAME, TITLE, text, rows)


def make(opts: common.FigOptions, datasets: Sequence[str] | None = None) -> common.Drawn:
    """The figure; ``datasets`` defaults to both corpora in full mode and to 1M otherwise."""
    datasets = datasets or opts.pick(common.DATASETS, ("1m",), ("1m",))
    chosen = {d: pairs(d, opts.mode) for d in datasets}
    if opts.tiny:  # every code path, fewest runs: the tail (knots, max) and one fabric pair
        chosen = {d: (p[0], p[2]) for d, p in chosen.items()}
    rows = [row for d in datasets for row in collect(opts, d, chosen[d])]
    return draw(opts, datasets, chosen, rows)


def main(argv: Sequence[str] | None = None) -> int:
    """This figure alone on chosen corpora (``libra-des figs`` draws the default ones)."""
    p = argparse.ArgumentParser(description=TITLE)
    p.add_argument("--out", type=Path, default=Path("figs"))
    p.add_argument("--quick", action="store_true")
    p.add_argument("--dataset", choices=common.DATASETS, action="append")
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args(argv)
    drawn = make(common.FigOptions(args.out, args.quick, args.workers), args.dataset)
    print(" ".join(str(f) for f in drawn.files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
