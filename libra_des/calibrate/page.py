"""``validation.html``: predicted against measured per op, with error bands (inline SVG).

One panel per fitted group (op, group size, layout, dtype): measured medians and the
simulator's price of the same case (``libra-des validate``'s replay through the cost model),
on log-log axes over the case's size (bytes, pair-weighted document length, or m*n*k); the
shaded band is the prediction times ``1 +/- p90`` of the leave-one-size-out cross-validated
error (the in-sample p90 when cross-validation did not run). A table lists the errors and the
kernel-under-collective interference cases. The page needs no network and no script.
"""

from __future__ import annotations

import html
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from libra_des.base.storage import write_atomic
from libra_des.hardware.compute.interference import fitted_share
from libra_des.hardware.profiles.fitting import FitResult, group_key, sample_size
from libra_des.hardware.profiles.profile import Profile
from libra_des.hardware.profiles.profile_replay import Replay, replay

W, H, PAD = 420, 260, 48
STYLE = """body{font-family:system-ui,sans-serif;margin:24px;color:#222}
table{border-collapse:collapse;margin:12px 0}td,th{border:1px solid #ccc;padding:3px 8px;
text-align:right}th{background:#f3f3f3}.panels{display:flex;flex-wrap:wrap;gap:16px}
figure{margin:0}figcaption{font-weight:600;font-size:14px}"""


def scale(values: np.ndarray, lo: float, hi: float, out0: float, out1: float) -> np.ndarray:
    """Log-scale ``values`` from [lo, hi] to [out0, out1]."""
    span = max(math.log10(hi) - math.log10(lo), 1e-12)
    return out0 + (np.log10(values) - math.log10(lo)) / span * (out1 - out0)


def panel(title: str, replays: list[Replay], band: float) -> str:
    """One SVG scatter: measured (dots), predicted (line) and the +/- band."""
    rs = sorted(replays, key=lambda r: sample_size(r.sample))
    x = np.array([sample_size(r.sample) for r in rs])
    meas = np.array([r.measured for r in rs])
    pred = np.array([r.predicted for r in rs])
    lo_b, hi_b = pred * max(1 - band, 1e-3), pred * (1 + band)
    xlo, xhi = float(x.min()) / 1.2, float(x.max()) * 1.2
    ylo = float(min(meas.min(), lo_b.min())) / 1.2
    yhi = float(max(meas.max(), hi_b.max())) * 1.2
    px = scale(x, xlo, xhi, PAD, W - 10)
    py, plo, phi = (scale(v, ylo, yhi, H - 30, 10) for v in (pred, lo_b, hi_b))
    my = scale(meas, ylo, yhi, H - 30, 10)
    area = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(px, phi, strict=True))
    area += " " + " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(px[::-1], plo[::-1], strict=True))
    line = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(px, py, strict=True))
    dots = "".join(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="3" fill="#d62728"/>'
                   for a, b in zip(px, my, strict=True))
    axes = (f'<line x1="{PAD}" y1="{H - 30}" x2="{W - 10}" y2="{H - 30}" stroke="#444"/>'
            f'<line x1="{PAD}" y1="10" x2="{PAD}" y2="{H - 30}" stroke="#444"/>'
            f'<text x="{PAD}" y="{H - 12}" font-size="10">{xlo:.3g}</text>'
            f'<text x="{W - 60}" y="{H - 12}" font-size="10">{xhi:.3g} (size)</text>'
            f'<text x="2" y="20" font-size="10">{yhi:.3g} s</text>'
            f'<text x="2" y="{H - 32}" font-size="10">{ylo:.3g} s</text>')
    legend = (f'<text x="{PAD + 8}" y="22" font-size="10" fill="#1f77b4">model '
              f'(band ±{band * 100:.0f}%)</text><text x="{PAD + 8}" y="34" font-size="10" '
              'fill="#d62728">measured</text>')
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" role="img" '
           f'aria-label="{html.escape(title)}">{axes}'
           f'<polygon points="{area}" fill="#1f77b4" fill-opacity="0.18"/>'
           f'<polyline points="{line}" fill="none" stroke="#1f77b4" stroke-width="1.5"/>'
           f"{dots}{legend}</svg>")
    return f"<figure><figcaption>{html.escape(title)}</figcaption>{svg}</figure>"


def error_rows(results: list[FitResult]) -> str:
    cells = []
    for r in results:
        f = r.fit
        ins = (float(np.median(r.fit_errors)), float(np.percentile(r.fit_errors, 90)))
        cv = ("-", "-") if r.cv_errors is None else (
            f"{np.median(r.cv_errors):.2f}", f"{np.percentile(r.cv_errors, 90):.2f}")
        cells.append(
            f"<tr><td>{html.escape(f.op)}</td><td>{f.group}</td><td>{f.gpus_per_node or '-'}</td>"
            f"<td>{html.escape(f.algorithm or f.dtype or '-')}</td><td>{f.n}</td>"
            f"<td>{ins[0]:.2f}</td><td>{ins[1]:.2f}</td><td>{cv[0]}</td><td>{cv[1]}</td></tr>")
    head = ("<tr><th>op</th><th>group</th><th>per node</th><th>algorithm / dtype</th><th>n</th>"
            "<th>fit median |err| %</th><th>fit p90 %</th><th>CV median %</th>"
            "<th>CV p90 %</th></tr>")
    return f"<table>{head}{''.join(cells)}</table>"


def interference_rows(profile: Profile) -> str:
    if not profile.interference:
        return "<p>No interference cases were measured (no all_reduce or all_to_all).</p>"
    head = ("<tr><th>GEMM m×n×k</th><th>collective</th><th>bytes</th><th>group</th>"
            "<th>GEMM alone s</th><th>GEMM under s</th><th>slowdown</th>"
            "<th>collective s</th><th>both s</th><th>overlap</th></tr>")
    rows = "".join(
        f"<tr><td>{c.m}×{c.n}×{c.k}</td><td>{html.escape(c.collective)}</td>"
        f"<td>{c.nbytes:.4g}</td><td>{c.group}</td><td>{c.kernel_s:.3g}</td>"
        f"<td>{c.kernel_under_s:.3g}</td><td>{c.kernel_slowdown:.2f}×</td>"
        f"<td>{c.collective_s:.3g}</td><td>{c.both_s:.3g}</td><td>{c.overlap:.2f}</td></tr>"
        for c in profile.interference)
    share = fitted_share([c.kernel_slowdown for c in profile.interference])
    gpu = (profile.gpu or profile.device).upper() != "CPU"
    use = ("read by <code>overlap.interference: on</code> when the scenario sets no "
           "<code>comm.sm_per_channel</code>" if gpu else "not used: a CPU has no SMs")
    fit = "" if share is None else (
        f"<p>SM share a collective takes, 1 &minus; 1/slowdown (median): {share:.3f}; {use}.</p>")
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
