"""Figures of the HTML report (matplotlib, the ``figs`` extra, imported inside functions).

The ``report`` command picks which of these to draw (by the results' scenario kind) and hands
the drawn images to :func:`libra_des.report.render`; this module only draws what it is given
(it knows no kinds). :data:`STAGES` is also the style helper ``paper_figs`` shares.

Each figure is drawn from result files alone and returned as base64 PNG with a caption:

* training runs: where the step goes (bubble, waits, exposed communication), core attention
  per GPU (computation, exposed and hidden exchange), the per-microbatch forward times;
* MoE runs: the layer breakdown (exposed stages) and the imbalance ratio per layer;
* sweeps: each headline metric per point.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from libra_des.report import DEFINITIONS

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


@dataclass(frozen=True)
class Png:
    caption: str
    png_base64: str


def panel() -> tuple[Figure, Any]:
    """One 7 x 3.6 inch panel (matplotlib imported here: the ``figs`` extra is optional)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 3.6), layout="constrained")
    return fig, fig.subplots()


def encode(fig: Figure, caption: str) -> Png:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return Png(caption, base64.b64encode(buf.getvalue()).decode())


def bars(names: Sequence[str], series: Mapping[str, Sequence[float]], ylabel: str,
         title: str, stacked: bool) -> Figure:
    fig, ax = panel()
    x = np.arange(len(names))
    bottom = np.zeros(len(names))
    width = 0.6 if stacked else 0.8 / max(len(series), 1)
    for k, (label, values) in enumerate(series.items()):
        v = np.asarray(values, dtype=float)
        offset = 0.0 if stacked else (k - (len(series) - 1) / 2) * width
        ax.bar(x + offset, v, width, bottom=bottom if stacked else None, label=label)
        if stacked:
            bottom += v
    ax.set_xticks(x, names, rotation=20 if len(names) > 4 else 0, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    if len(series) > 1:
        ax.legend(fontsize="small")
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
    for name, t in zip(names, samples, strict=True):
        counts, _ = np.histogram(t, bins=edges)
        ax.stairs(counts / t.size, edges, fill=True, alpha=0.5, label=f"{name} ({t.size} ops)")
    ax.set_xlabel("forward time of one microbatch on stage 0 (s)")
    ax.set_ylabel("fraction of forward ops")
    ax.legend(fontsize="small")
    out.append(encode(fig, "Per-microbatch forward times on the first pipeline stage."))
    return out


def moe(results: Results) -> list[Png]:
    names = list(results)
    stages = [s for s in STAGES if any(s in r["layer_breakdown_s"] for r in results.values())]
    series = {STAGES[s]: [r["layer_breakdown_s"].get(s, {}).get("exposed", 0.0) * 1e3
                          for r in results.values()] for s in stages}
    out = [encode(bars(names, series, "ms per layer", "MoE layer: exposed stages",
                       stacked=True), "Critical-path time per MoE layer, by stage.")]
    fig, ax = panel()
    for name, r in results.items():
        ax.plot(r["imbalance_ratio"]["per_layer"], label=name)
    ax.set_xlabel("MoE layer")
    ax.set_ylabel("imbalance ratio (max / mean GPU load)")
    ax.legend(fontsize="small")
    out.append(encode(fig, "Expert-parallel load imbalance per layer (1 = balanced)."))
    return out


def sweep(rows: Sequence[Mapping[str, Any]], axes: Sequence[str], metrics: Sequence[str]
          ) -> list[Png]:
    labels = [", ".join(str(r.get(k, "")) for k in axes if k in r)[:40] or r["id"][:8]
              for r in rows]
    out = []
    for metric in metrics:
        values = [v for r in rows if isinstance(v := r.get(metric), int | float)]
        if len(values) != len(rows):
            continue
        words = DEFINITIONS.get(metric, (metric, ""))[0]
        fig = bars(labels, {words: values}, words, f"{words} per point", stacked=False)
        fig.axes[0].set_xlabel("point (" + ", ".join(axes) + ")")
        out.append(encode(fig, f"{words} [{metric}] per sweep point."))
    return out


#: The figures of one kind's runs, by scenario kind name (the ``report`` command looks the
#: kind up in :mod:`libra_des.kinds`).
DRAWINGS: Mapping[str, Callable[[Results], list[Png]]] = {
    "training": training,
    "moe_inference": moe,
}
