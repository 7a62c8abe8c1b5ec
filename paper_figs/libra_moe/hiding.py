"""Where hiding stops: Libra's gain over SGLang and EPLB, and its exposed host time, across
input length, batch size and host CPU speed.

Libra hides its host stages (sharding, metadata, replica planning) behind MoE_local, the
local experts' grouped GEMM, and the previous layer. The window shrinks with the tokens per
GPU (``workload.seq_len`` x ``workload.batch``) while the host stages do not (their cost is set
by the ``[G, E]`` counts, the moves and the replicas), and a slower host lengthens them. The
host speed is varied through the profile, not code: each point runs the shipped H200 profile
with a ``host`` block whose per-call costs (Python iteration, torch op, element, launch) are
the ones the default run is priced with (``host_stages.prices`` of a run) times a factor;
the device-host copy latency is the link's and stays. Scenario ``paper-moe-breakdown``.
Quick mode: 8 layers, 1 batch, a 3 x 2 x 3 grid, one seed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from libra_des import api
from libra_des.report.figures import outside_legend
from paper_figs import common
from paper_figs.libra_moe.systems import SCENARIO

NAME = "moe_hiding"
TITLE = "Where hiding stops: Libra's gain and exposed host time vs input, batch, host speed"
SYSTEMS = ("sglang", "eplb", "libra")
#: The shipped profile the scenario runs with (it sets none: the default, H200 SXM).
PROFILE = "calibration/profiles/h200-sxm.json"
#: Host prices a slower CPU multiplies (the copy's latency is the PCIe link's and its wait).
CPU_PRICES = ("python_iteration_s", "torch_op_s", "element_op_s", "launch_s")
#: Libra's host stages as ``host_stages.per_layer_s`` names them.
HOST_STAGES = ("sharding_cpu", "metadata", "replication_cpu")


@dataclass(frozen=True)
class Grid:
    seqs: tuple[int, ...]
    batches: tuple[int, ...]
    hosts: tuple[float, ...]  # host per-call costs as multiples of the default's
    base: tuple[str, ...]


def grid(opts: common.FigOptions) -> Grid:
    return Grid(
        opts.pick((128, 256, 512, 1024, 2048, 4096), (128, 512, 2048), (64, 128)),
        opts.pick((4, 8, 16, 32), (4, 32), (4,)),
        opts.pick((1.0, 2.0, 4.0, 8.0, 16.0), (1.0, 4.0, 16.0), (1.0, 8.0)),
        opts.pick(("model.layers=16", "workload.batches=2"),
                  ("model.layers=8", "workload.batches=1"),
                  ("model.layers=2", "workload.batches=1")),
    )


def default_prices() -> dict[str, dict[str, Any]]:
    """The host prices a run of the scenario is priced with (its ``host_stages.prices``)."""
    run = api.simulate(common.SCENARIOS / SCENARIO, list(common.TINY_MOE))
    prices: dict[str, dict[str, Any]] = run.data["host_stages"]["prices"]
    return prices


def host_profile(factor: float, prices: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The shipped profile with a ``host`` block: the default per-call costs, the CPU's ones
    times ``factor``."""
    profile: dict[str, Any] = json.loads(api.shipped_path(PROFILE).read_text())

    def price(name: str) -> dict[str, Any]:
        p = prices[name]
        scale = factor if name in CPU_PRICES else 1.0
        return {"value": float(p["value"]) * scale,
                "source": f"{p['source']}, x{factor:g} (moe_hiding study: a slower host)"
                if scale != 1.0 else str(p["source"])}

    profile["host"] = {"cpu": f"the default host's costs x{factor:g}",
                       **{n: price(n) for n in (*CPU_PRICES, "copy_s")}}
    return profile


def exposed_host_s(r: dict[str, Any]) -> float:
    """Host time on the layer's critical path: each host stage's exposed part and the
    launches the host could not issue ahead of the stream."""
    host = r["host_stages"]
    stages = host["per_layer_s"]
    return float(sum(stages[n]["exposed"] for n in HOST_STAGES if n in stages)
                 + host["launches_per_layer"]["exposed"])


def host_s(r: dict[str, Any]) -> float:
    stages = r["host_stages"]["per_layer_s"]
    return float(sum(stages[n]["seconds"] for n in HOST_STAGES if n in stages))


def local_window_s(r: dict[str, Any]) -> float:
    part = r["layer_breakdown_s"]["moe_local"]
    return float(part["exposed"] + part["hidden"])


def exposed_copy_s(r: dict[str, Any]) -> float:
    return float(r["layer_breakdown_s"]["replica_copy"]["exposed"])


def rows(opts: common.FigOptions) -> list[dict[str, Any]]:
    """One row per (seq_len, batch, host factor) cell: Libra's gain over SGLang and EPLB (%,
    mean over seeds), Libra's host stages, their exposed part, its MoE_local window and its
    exposed replica copies (ms per layer)."""
    g = grid(opts)
    prices = default_prices()
    study = common.sweep(
        opts, NAME, SCENARIO,
        [common.grid("workload.seq_len", g.seqs), common.grid("workload.batch", g.batches),
         common.grid("profile", [host_profile(f, prices) for f in g.hosts]),
         common.grid("balancer.policy", list(SYSTEMS))],
        g.base,
    )

    def tput(r: dict[str, Any]) -> float:
        return float(r["prefill_tokens_per_s"])

    out = []
    for i, s in enumerate(g.seqs):
        for j, b in enumerate(g.batches):
            for k, f in enumerate(g.hosts):
                libra = study.values((i, j, k, 2), tput)
                row: dict[str, Any] = {"seq_len": s, "batch": b, "host_factor": f,
                                       "tokens_per_gpu": s * b / 8}
                for m, other in enumerate(SYSTEMS[:2]):
                    gain = (libra / study.values((i, j, k, m), tput) - 1) * 100
                    row[f"gain_over_{other}_percent"] = float(gain.mean())
                for key, fn in (("libra_host_ms", host_s), ("libra_exposed_host_ms",
                                                            exposed_host_s),
                                ("libra_moe_local_ms", local_window_s),
                                ("libra_exposed_copy_ms", exposed_copy_s)):
                    row[key] = float(study.values((i, j, k, 2), fn).mean() * 1e3)
                out.append(row)
    return out


def crossing(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """First x where ``ys`` turns positive (linear in log2 x between grid points; ``xs[0]``
    when it already is), or None when it never does."""
    if ys and ys[0] > 0:
        return float(xs[0])
    for a, b, ya, yb in zip(xs, xs[1:], ys, ys[1:], strict=False):
        if ya <= 0 < yb:
            la, lb = np.log2(a), np.log2(b)
            return float(2 ** (la + (lb - la) * (-ya) / (yb - ya)))
    return None


def make(opts: common.FigOptions) -> common.Drawn:
    g = grid(opts)
    data = rows(opts)
    fig, axes = common.new_figure(3, width=4.4, height=3.8)
    ax_s, ax_e, ax_x = axes
    styles = ["-", "--", ":", "-."]
    colors = ["#1f77b4", "#ff7f0e", "#d62728", "#9467bd", "#2ca02c"]
    for j, b in enumerate(g.batches):
        for k, f in enumerate(g.hosts):
            cell = [r for r in data if r["batch"] == b and r["host_factor"] == f]
            xs = [r["seq_len"] for r in cell]
            style = {"ls": styles[j % len(styles)], "color": colors[k % len(colors)],
                     "marker": "o", "ms": 3}
            label = f"batch {b}, host x{f:g}"
            ax_s.plot(xs, [r["gain_over_sglang_percent"] for r in cell], label=label, **style)
            ax_e.plot(xs, [r["gain_over_eplb_percent"] for r in cell], label=label, **style)
            ax_x.plot(xs, [r["libra_exposed_host_ms"] for r in cell], label=label, **style)
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(g.seqs), [str(s) for s in g.seqs])
    for ax in (ax_s, ax_e):
        ax.axhline(0, color="k", lw=0.8)
    outside_legend(ax_x, fontsize="x-small")
    common.label_axes(ax_s, "tokens per request", "throughput gain (%)", "Libra over SGLang")
    common.label_axes(ax_e, "tokens per request", "throughput gain (%)", "Libra over EPLB")
    common.label_axes(ax_x, "tokens per request", "ms per MoE layer",
                      "Libra's exposed host time")
    layers = int(next(t for t in g.base if t.startswith("model.layers=")).partition("=")[2])
    model = common.model_title("Qwen3-235B-A22B", SCENARIO, layers)
    fig.suptitle(f"Where hiding stops, {model}, 8x H200 ({opts.mode}: "
                 f"{', '.join(g.base)}; host x f: CPU per-call costs times f)")
    return common.save(
        fig, opts, NAME, TITLE, common.caption(SCENARIO, opts, "moe prefill"), data
    )
