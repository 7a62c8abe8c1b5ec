"""Figures of the HTML report (matplotlib, the ``figs`` extra, imported inside functions).

The ``report`` command picks which of these to draw (by the results' scenario kind) and hands
the drawn images to :func:`libra_des.report.render`; this module only draws what it is given
(it knows no kinds). Its style (:data:`STAGES`, :data:`PALETTE`, :func:`outside_legend`,
:func:`top_parts`, :func:`text_colour`) is what ``paper_figs`` shares.

Each figure is drawn from result files alone and returned as base64 PNG with a caption:

* training runs: where the step goes (bubble, waits, exposed communication), core attention
  per GPU (computation, exposed and hidden exchange), the per-microbatch forward times;
* several training runs of one cluster and workload: a waterfall of the step time's
  difference, Libra (or the first run) against each other run, by component
  (``libra-des explain``'s split);
* MoE runs: the layer breakdown (exposed stages) and the imbalance ratio per layer;
* sweeps: one figure per headline metric, a panel along each swept axis (one series per
  value of the other axes, e.g. per system), and a heatmap of the two axes when exactly two
  are swept.

Every figure has a title, and no two series of one figure share a colour: series take the
colours of :data:`PALETTE` in turn (colour-blind safe), and a figure draws at most
``len(PALETTE)`` series (the caption says how many were left out; a stacked bar instead puts
its smallest parts into one "other" part, so the bar still adds up to the whole). Legends sit
outside the data area (:func:`outside_legend`); a categorical axis is drawn as dots, never
joined by lines, and series that coincide stay visible (each its own marker, drawn smaller
on top of the one before). A sweep draws one figure per metric, one panel per swept axis.
Heatmaps use ``cividis``, a colour map made to read the same with colour-vision deficiency,
with each cell's label in black or white by the cell colour's luminance.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from libra_des.report import DEFINITIONS
from libra_des.report.numbers import show, unit_of, with_unit

if TYPE_CHECKING:
    from matplotlib.figure import Figure

Results = Mapping[str, Mapping[str, Any]]
FRACTIONS = {"bubble_fraction": "pipeline bubble", "dp_straggler_fraction": "DP straggler wait",
             "pool_wait_fraction": "pool wait", "comm_exposed_fraction": "exposed comm"}


#: MoE stages in execution order, in words (result files use identifiers); unknown ones go
#: last. The plotting style helper ``paper_figs`` shares with the report.
STAGES = {
    "attention": "attention",
    "gate": "gate (router)",
    "prediction": "expert prediction",
    "replica_copy": "replica copies",
    "dispatch": "token dispatch",
    "moe_local": "local experts",
    "sharding_cpu": "token sharding (CPU)",
    "metadata": "sharding metadata",
    "moe_remote": "remote experts",
    "combine": "combine",
}


#: Series colours: Okabe and Ito's eight colour-universal-design colours ("Color Universal
#: Design", 2008), then four of Paul Tol's "muted" scheme (wine, olive, indigo, pale grey)
#: that stay apart from them; both are designed to be told apart with colour-vision deficiency.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
           "#000000", "#882255", "#999933", "#332288", "#DDDDDD")
#: The heatmaps' colour map (perceptually uniform, colour-vision-deficiency friendly).
HEATMAP = "cividis"
#: Series markers, one per series (with :data:`PALETTE`): coinciding series stay apart.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h", "*", "p")
#: A stacked bar's parts beyond the palette's colours, summed into one part of this name.
OTHER = "other"
#: Relative luminance (WCAG 2.x) below which a cell's label is white rather than black: where
#: white and black text have equal contrast ratios, (L + 0.05) * (L + 0.05) = 1.05 * 0.05.
DARK_LUMINANCE = 0.179


def outside_legend(ax: Any, **style: Any) -> None:
    """The axes' legend to the right of its data area, never over it."""
    ax.legend(**{"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0.0,
                 "fontsize": "small", **style})


def top_parts(series: Mapping[str, Sequence[float]], limit: int = len(PALETTE)
              ) -> dict[str, list[float]]:
    """At most ``limit`` parts of a stacked bar: the largest ``limit - 1`` (by total) in
    their given order, the rest summed into :data:`OTHER`, so every bar keeps its total."""
    parts = {k: [float(x) for x in v] for k, v in series.items()}
    if len(parts) <= limit:
        return parts
    keep = set(sorted(parts, key=lambda k: -sum(abs(x) for x in parts[k]))[:limit - 1])
    rest = [parts[k] for k in parts if k not in keep]
    out = {k: v for k, v in parts.items() if k in keep}
    out[OTHER] = [float(sum(col)) for col in zip(*rest, strict=True)]
    return out


def luminance(rgba: Sequence[float]) -> float:
    """Relative luminance of an sRGB colour (WCAG 2.x definition)."""
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgba[:3]]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def text_colour(rgba: Sequence[float]) -> str:
    """Black or white, whichever reads on a cell of colour ``rgba`` (by its luminance)."""
    return "white" if luminance(rgba) < DARK_LUMINANCE else "black"


@dataclass(frozen=True)
class Png:
    caption: str
    png_base64: str


def panel() -> tuple[Figure, Any]:
    """One 7 x 3.6 inch panel (matplotlib imported here: the ``figs`` extra is optional)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 3.6), layout="constrained")
    ax = fig.subplots()
    ax.set_prop_cycle(color=list(PALETTE))
    return fig, ax


def encode(fig: Figure, caption: str) -> Png:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return Png(caption, base64.b64encode(buf.getvalue()).decode())


def bars(names: Sequence[str], series: Mapping[str, Sequence[float]], ylabel: str,
         title: str, stacked: bool) -> Figure:
    fig, ax = panel()
    x = np.arange(len(names))
    bottom = np.zeros(len(names))
    if stacked:
        series = top_parts(series)
    width = 0.6 if stacked else 0.8 / max(len(series), 1)
    for k, (label, values) in enumerate(list(series.items())[:len(PALETTE)]):
        v = np.asarray(values, dtype=float)
        offset = 0.0 if stacked else (k - (len(series) - 1) / 2) * width
        ax.bar(x + offset, v, width, bottom=bottom if stacked else None, label=label,
               color=PALETTE[k])
        if stacked:
            bottom += v
    ax.set_xticks(x, names, rotation=20 if len(names) > 4 else 0, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    if len(series) > 1:
        outside_legend(ax)
    return fig


def training(results: Results) -> list[Png]:
    names = list(results)
    out = [encode(bars(names, {w: [r[k] * 100 for r in results.values()]
                               for k, w in FRACTIONS.items()}, "share of the step (%)",
                       "Step time not spent computing", stacked=True),
                  "Where the step goes: pipeline bubble, DP straggler wait, pool wait and "
                  "exposed communication, as % of step time.")]
    out.append(encode(bars(names, {
        "computation": [r["attention_compute_s"] for r in results.values()],
        "exposed exchange": [r["attention_comm_exposed_s"] for r in results.values()],
        "hidden exchange": [r["attention_comm_hidden_s"] for r in results.values()],
    }, "seconds per GPU per step", "Core attention per GPU", stacked=False),
        "Core attention per GPU per step: computation, and exchange on (exposed) and off "
        "(hidden) the critical path."))
    fig, ax = panel()
    samples = [np.asarray(r["microbatch_forward_s"], dtype=float) for r in results.values()]
    edges = np.histogram_bin_edges(np.concatenate(samples), bins="auto")
    for k, (name, t) in enumerate(zip(names[:len(PALETTE)], samples, strict=False)):
        counts, _ = np.histogram(t, bins=edges)
        ax.stairs(counts / t.size, edges, fill=True, alpha=0.5, color=PALETTE[k],
                  label=f"{name} ({t.size} ops)")
    ax.set(xlabel="forward time of one microbatch on stage 0 (s)", ylabel="fraction of forward ops",
           title="Per-microbatch forward times, first pipeline stage")
    outside_legend(ax)
    out.append(encode(fig, "Per-microbatch forward times on the first pipeline stage."))
    return out


def moe(results: Results) -> list[Png]:
    names = list(results)
    found = {s for r in results.values() for s in r["layer_breakdown_s"]}
    stages = [s for s in STAGES if s in found] + sorted(found.difference(STAGES))
    series = {STAGES.get(s, s.replace("_", " ")): [
        r["layer_breakdown_s"].get(s, {}).get("exposed", 0.0) * 1e3 for r in results.values()]
        for s in stages}
    out = [encode(bars(names, series, "ms per layer", "MoE layer: exposed stages",
                       stacked=True), "Critical-path time per MoE layer, by stage (every "
                  f"stage; beyond {len(PALETTE) - 1} stages the smallest are summed as "
                  f"'{OTHER}').")]
    fig, ax = panel()
    for k, (name, r) in enumerate(list(results.items())[:len(PALETTE)]):
        ax.plot(r["imbalance_ratio"]["per_layer"], label=name, color=PALETTE[k],
                marker=MARKERS[k], markersize=7 - 0.4 * k)
    ax.set(xlabel="MoE layer", ylabel="imbalance ratio (max / mean GPU load)",
           title="Expert-parallel load imbalance per layer")
    outside_legend(ax)
    out.append(encode(fig, "Expert-parallel load imbalance per layer (1 = balanced)."))
    return out


def waterfall(split: Mapping[str, Any], names: tuple[str, str], unit: str) -> Png:
    """Run B's value, each component of A - B as a floating bar (increases in vermillion,
    decreases in blue), and run A's value: ``split`` is an attribution split's ``as_dict``.
    The value axis spans the levels the bars walk through (not from 0), so the parts show."""
    fig, ax = panel()
    parts = list(split["components"].items())
    values = np.array([v for _, v in parts], dtype=float)
    x = np.arange(len(parts) + 2)
    levels = float(split["b"]) + np.concatenate([[0.0], np.cumsum(values)])
    # Three series (totals, increases, decreases), one colour each.
    ax.bar(x[[0, -1]], np.array([split["b"], split["a"]], dtype=float) * 1e3, 0.6,
           color=PALETTE[7], label="run totals")
    for mask, colour, name in ((values > 0, PALETTE[5], "adds time"),
                               (values <= 0, PALETTE[0], "saves time")):
        ax.bar(x[1:-1][mask], values[mask] * 1e3, 0.6, bottom=levels[:-1][mask] * 1e3,
               color=colour, label=name)
    # The parts are small beside the totals: the axis spans the levels the bars walk through.
    lo, hi = float(min(levels.min(), split["a"])), float(max(levels.max(), split["a"]))
    pad = 0.15 * (hi - lo) or 0.05 * hi
    ax.set_ylim(max(lo - pad, 0.0) * 1e3, (hi + pad) * 1e3)
    ax.set_xticks(x, [names[1], *(k.replace("_", " ") for k, _ in parts), names[0]],
                  rotation=35, ha="right", fontsize="small")
    ax.set_ylabel(f"{unit} (ms)")
    ax.set_title(f"{names[0]} against {names[1]}: {unit}")
    ax.grid(axis="y", alpha=0.3)
    return encode(fig, f"Why {names[0]}'s {unit} differs from {names[1]}'s: each component "
                  "of the difference (vermillion adds time, blue saves it); they add up to "
                  f"the measured difference ({with_unit(float(split['difference']), 's')}).")


def short(keys: Sequence[str]) -> str:
    """An axis's keys as an axis label: each key's last part (``balancer.policy`` ->
    ``policy``); the caption names the full keys."""
    return " + ".join(k.split(".")[-1] for k in keys)


def label(row: Mapping[str, Any], keys: Sequence[str]) -> str:
    """A point's value on one axis, in words (a --zip axis names every key's value)."""
    return ", ".join(f"{k.split('.')[-1]}={row.get(k)}" if len(keys) > 1 else str(row.get(k))
                     for k in keys)


def scaled(metric: str, values: Sequence[float]) -> tuple[list[float], str]:
    """Values as plotted (shares in per cent) and the axis label with its unit."""
    words = DEFINITIONS.get(metric, (metric, ""))[0]
    if unit_of(metric) == "share":
        return [v * 100 for v in values], f"{words} (%)"
    return list(values), words


def numeric(values: Sequence[Any]) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def axis_panel(ax: Any, rows: Sequence[Mapping[str, Any]], axes: Sequence[Sequence[str]],
               along: int, metric: str) -> int:
    """``metric`` against axis ``along`` on ``ax``: one series per combination of the other
    axes' values; lines along a numeric axis, dots (no joining line) along a categorical one.
    Each series has its own marker, drawn smaller than the one before, so series that
    coincide stay visible. Returns how many series were left out (beyond the palette)."""
    keys = axes[along]
    others = [a for i, a in enumerate(axes) if i != along]
    xs = list(dict.fromkeys(label(r, keys) for r in rows))
    first: list[Any] = list(dict.fromkeys(r.get(keys[0]) for r in rows))
    is_num = numeric(first) and len(keys) == 1
    series: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        name = " / ".join(label(r, k) for k in others) or DEFINITIONS.get(metric, (metric,))[0]
        x = float(r[keys[0]]) if is_num else float(xs.index(label(r, keys)))
        series.setdefault(name, []).append((x, float(r[metric])))
    drawn = list(series.items())[:len(PALETTE)]
    ylabel = scaled(metric, [0.0])[1]
    for k, (name, points) in enumerate(drawn):
        points.sort()
        ys, ylabel = scaled(metric, [p[1] for p in points])
        ax.plot([p[0] for p in points], ys, marker=MARKERS[k], markersize=8 - 0.4 * k,
                linestyle="-" if is_num else "none", label=name, color=PALETTE[k])
    if is_num and min(first) > 0 and max(first) / min(first) >= 8:
        ax.set_xscale("log", base=2)
    if is_num:
        ax.set_xticks(sorted(float(v) for v in first), [str(v) for v in sorted(first)])
    else:
        ax.set_xticks(range(len(xs)), xs, rotation=30 if len(xs) > 3 else 0,
                      ha="right" if len(xs) > 3 else "center")
        ax.set_xlim(-0.5, len(xs) - 0.5)
    ax.set(xlabel=short(keys), ylabel=ylabel, title=f"against {short(keys)}")
    ax.grid(alpha=0.3)
    if others:
        outside_legend(ax, title=" / ".join(short(k) for k in others))
    return len(series) - len(drawn)


def metric_facets(rows: Sequence[Mapping[str, Any]], axes: Sequence[Sequence[str]],
                  metric: str) -> Png:
    """One figure for ``metric``: a panel per swept axis (rather than a near-identical
    figure per axis)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 3.2 * len(axes)), layout="constrained")
    panels = fig.subplots(len(axes), 1, squeeze=False)[:, 0]
    left = [axis_panel(ax, rows, axes, i, metric) for i, ax in enumerate(panels)]
    words = DEFINITIONS.get(metric, (metric, ""))[0]
    fig.suptitle(f"{words} along each swept axis")
    more = "".join(f" ({n} more series against {short(axes[i])} not drawn: at most "
                   f"{len(PALETTE)} colours)" for i, n in enumerate(left) if n)
    named = "; ".join(" + ".join(a) for a in axes)
    return encode(fig, f"{words} [{metric}] against each swept axis ({named}), one panel "
                  f"per axis, one series per value of the other axes{more}.")


def heatmap(rows: Sequence[Mapping[str, Any]], axes: Sequence[Sequence[str]], metric: str
            ) -> Png:
    """``metric`` over the two swept axes, each cell annotated with its rounded value in
    black or white by the cell colour's luminance."""
    from matplotlib import colormaps

    cols = list(dict.fromkeys(label(r, axes[0]) for r in rows))
    lines = list(dict.fromkeys(label(r, axes[1]) for r in rows))
    grid = np.full((len(lines), len(cols)), np.nan)
    for r in rows:
        grid[lines.index(label(r, axes[1])), cols.index(label(r, axes[0]))] = float(r[metric])
    fig, ax = panel()
    words = DEFINITIONS.get(metric, (metric, ""))[0]
    shown_grid = grid * 100 if unit_of(metric) == "share" else grid
    image = ax.imshow(shown_grid, cmap=HEATMAP, aspect="auto")
    fig.colorbar(image, ax=ax, label=scaled(metric, [0.0])[1])
    cmap = colormaps[HEATMAP]
    for (i, j), v in np.ndenumerate(grid):
        if np.isfinite(v):
            ax.text(j, i, show(v, metric), ha="center", va="center", fontsize="small",
                    color=text_colour(cmap(image.norm(shown_grid[i, j]))))
    ax.set_xticks(range(len(cols)), cols, rotation=30 if len(cols) > 3 else 0,
                  ha="right" if len(cols) > 3 else "center")
    ax.set_yticks(range(len(lines)), lines)
    ax.set(xlabel=short(axes[0]), ylabel=short(axes[1]),
           title=f"{words} over {short(axes[0])} and {short(axes[1])}")
    return encode(fig, f"{words} [{metric}] over the two swept axes ({' + '.join(axes[0])}; "
                  f"{' + '.join(axes[1])}; cells rounded).")


def sweep(rows: Sequence[Mapping[str, Any]], axes: Sequence[Sequence[str]],
          metrics: Sequence[str]) -> list[Png]:
    """Per metric: one figure with a panel along each axis, and a heatmap when exactly two
    are swept (points that failed or lack the metric are left out)."""
    out = []
    for metric in metrics:
        have = [r for r in rows if numeric([r.get(metric)]) and not r.get("error")]
        if not have or not axes:
            continue
        out.append(metric_facets(have, axes, metric))
        if len(axes) == 2:
            out.append(heatmap(have, axes, metric))
    return out


#: The figures of one kind's runs, by scenario kind name (the ``report`` command looks the
#: kind up in :mod:`libra_des.kinds`).
DRAWINGS: Mapping[str, Callable[[Results], list[Png]]] = {
    "training": training,
    "moe_inference": moe,
}
