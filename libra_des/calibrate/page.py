"""``validation.html``: predicted against measured per op, with error bands (matplotlib
figures inlined as SVG).

One panel per fitted group (op, group size, layout, dtype): measured medians and the
simulator's price of the same case (``libra-des validate``'s replay through the cost model),
on log-log axes over the case's size (bytes, pair-weighted document length, or m*n*k); the
shaded band is the prediction times ``1 +/- p90`` of the leave-one-size-out cross-validated
error (the in-sample p90 when cross-validation did not run). A table lists the errors and the
kernel-under-collective interference cases. The page needs no network and no script;
matplotlib (the ``calibrate`` extra) draws it.
"""

from __future__ import annotations

import html
import io
from collections import defaultdict
from pathlib import Path

import numpy as np

from libra_des.base.numbers import sig3, with_unit
from libra_des.base.storage import write_atomic
from libra_des.hardware.compute.interference import fitted_share
from libra_des.hardware.profiles.fitting import FitResult, group_key, sample_size
from libra_des.hardware.profiles.profile import Profile, Sample
from libra_des.hardware.profiles.profile_replay import Replay, replay

STYLE = """body{font-family:system-ui,sans-serif;margin:24px;color:#222}
table{border-collapse:collapse;margin:12px 0}td,th{border:1px solid #ccc;padding:3px 8px;
text-align:right}th{background:#f3f3f3}.panels{display:flex;flex-wrap:wrap;gap:16px}
figure{margin:0}figcaption{font-weight:600;font-size:14px}"""
#: The model's and the measurements' colours: the report's palette (colour-blind safe).
MODEL, MEASURED = "#0072B2", "#D55E00"


def size_label(sample: Sample) -> str:
    """What :func:`sample_size` measures for this sample's op, for the x axis."""
    if sample.nbytes is not None:
        return "message size"
    if sample.attention is not None:
        return "pair-weighted document length (tokens)"
    return "GEMM size m·n·k"


def panel(title: str, replays: list[Replay], band: float) -> str:
    """One figure (matplotlib, inlined as SVG): measured (dots), predicted (line) and the
    +/- band, log-log; labels in three significant digits with units, never clipped (the
    SVG's box is the drawing's tight box)."""
    from matplotlib import rc_context
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    rs = sorted(replays, key=lambda r: sample_size(r.sample))
    x = np.array([sample_size(r.sample) for r in rs])
    meas = np.array([r.measured for r in rs])
    pred = np.array([r.predicted for r in rs])
    fig = Figure(figsize=(4.6, 3.0))
    ax = fig.subplots()
    ax.fill_between(x, pred * max(1 - band, 1e-3), pred * (1 + band), color=MODEL, alpha=0.18,
                    linewidth=0)
    ax.plot(x, pred, color=MODEL, linewidth=1.5, label=f"model (band ±{band * 100:.0f} %)")
    ax.plot(x, meas, "o", color=MEASURED, markersize=4, label="measured")
    ax.set_xscale("log")
    ax.set_yscale("log")
    unit = "B" if rs[0].sample.nbytes is not None else ""
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: with_unit(v, unit)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: with_unit(v, "s")))
    ax.set_xlabel(size_label(rs[0].sample))
    ax.set_ylabel("time")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    buf = io.StringIO()
    # Scoped settings (the host's rcParams stay as they were): text as text, ids from a fixed
    # salt and no date, so the page is the same for the same profile.
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": "libra-des"}):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    return (f'<figure><figcaption>{html.escape(title)}</figcaption>'
            f'<div role="img" aria-label="{html.escape(title)}">{svg}</div></figure>')


def error_rows(results: list[FitResult]) -> str:
    cells = []
    for r in results:
        f = r.fit
        ins = (float(np.median(r.fit_errors)), float(np.percentile(r.fit_errors, 90)))
        cv = ("-", "-") if r.cv_errors is None else (
            sig3(float(np.median(r.cv_errors))), sig3(float(np.percentile(r.cv_errors, 90))))
        cells.append(
            f"<tr><td>{html.escape(f.op)}</td><td>{f.group}</td><td>{f.gpus_per_node or '-'}</td>"
            f"<td>{html.escape(f.algorithm or f.dtype or '-')}</td><td>{f.n}</td>"
            f"<td>{sig3(ins[0])}</td><td>{sig3(ins[1])}</td><td>{cv[0]}</td><td>{cv[1]}</td></tr>")
    head = ("<tr><th>op</th><th>group</th><th>per node</th><th>algorithm / dtype</th><th>n</th>"
            "<th>fit median |err| %</th><th>fit p90 %</th><th>CV median %</th>"
            "<th>CV p90 %</th></tr>")
    return f"<table>{head}{''.join(cells)}</table>"


def interference_rows(profile: Profile) -> str:
    if not profile.interference:
        return "<p>No interference cases were measured (no all_reduce or all_to_all).</p>"
    head = ("<tr><th>GEMM m×n×k</th><th>collective</th><th>bytes</th><th>group</th>"
            "<th>GEMM alone</th><th>GEMM under</th><th>slowdown</th>"
            "<th>collective</th><th>both</th><th>overlap</th></tr>")
    rows = "".join(
        f"<tr><td>{c.m}×{c.n}×{c.k}</td><td>{html.escape(c.collective)}</td>"
        f"<td>{with_unit(c.nbytes, 'B')}</td><td>{c.group}</td>"
        f"<td>{with_unit(c.kernel_s, 's')}</td>"
        f"<td>{with_unit(c.kernel_under_s, 's')}</td><td>{with_unit(c.kernel_slowdown, 'x')}</td>"
        f"<td>{with_unit(c.collective_s, 's')}</td><td>{with_unit(c.both_s, 's')}</td>"
        f"<td>{sig3(c.overlap)}</td></tr>"
        for c in profile.interference)
    share = fitted_share([c.kernel_slowdown for c in profile.interference])
    gpu = (profile.gpu or profile.device).upper() != "CPU"
    use = ("read by <code>overlap.interference: on</code> when the scenario sets no "
           "<code>comm.sm_per_channel</code>" if gpu else "not used: a CPU has no SMs")
    fit = "" if share is None else (
        f"<p>SM share a collective takes, 1 &minus; 1/slowdown (median): {sig3(share)}; {use}.</p>")
    return f"<table>{head}{rows}</table>{fit}"


def page(profile: Profile, results: list[FitResult]) -> str:
    """The whole page as text (deterministic for a given profile and results)."""
    by_key: dict[tuple[str, int, int, str], list[Replay]] = defaultdict(list)
    for r in replay(profile):
        by_key[group_key(r.sample)].append(r)
    bands = {}
    for res in results:
        errs = res.cv_errors if res.cv_errors is not None else res.fit_errors
        f = res.fit
        gpn = min(f.gpus_per_node or f.group, f.group)
        key = (f.op, f.group, gpn, "") if f.model == "alpha_beta" else (f.op, 1, 1, f.dtype or "")
        bands[key] = float(np.percentile(errs, 90)) / 100
    panels = "".join(
        panel(f"{op}, group {g}" + (f" ({dt})" if dt else ""), rs, bands.get((op, g, gpn, dt), 0))
        for (op, g, gpn, dt), rs in sorted(by_key.items()))
    title = f"Calibration of {profile.device}"
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{html.escape(title)}"
        f"</title><style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>"
        f"<p>{len(profile.samples)} samples on {profile.gpu_count or '?'} × "
        f"{html.escape(profile.gpu or profile.device)}; {html.escape(profile.interconnect.name)}"
        f"; measured {html.escape(profile.date)}. Each panel: the simulator's price of every "
        "measured case against the measurement; the band is ± the p90 cross-validated error "
        "(leave one size out).</p>"
        f"<h2>Errors per fit</h2>{error_rows(results)}"
        f"<h2>Predicted against measured</h2><div class=panels>{panels}</div>"
        f"<h2>Kernel under collective</h2>{interference_rows(profile)}</body></html>\n")


def write_page(profile: Profile, results: list[FitResult], path: Path) -> Path:
    write_atomic(path, page(profile, results))
    return path
