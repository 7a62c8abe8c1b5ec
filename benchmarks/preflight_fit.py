"""Set the preflight's coefficients from measured runs (``preflight_check.py --fit``).

Per kind, the fast-fidelity cases fit ``seconds = start + sum(w_k * term_k)`` with w >= 0 by
a linear programme that minimises the largest relative error over the cases (what the
3x promise is about), and peak memory by one that keeps every estimate at or above its
measured peak while minimising the summed ratio estimate / peak. A fidelity's own cost
(``detailed``) is the measured excess over that fast prediction, fitted as a power of the
GPUs (training) or per EP GPU-layer x EP (MoE). Where a paired case moves one term apart
from the rest (:data:`MARGINALS`: the quickstart with 16x the TAP blocks, and with short
samples), that term's measured bytes per item give a memory floor (``floor_bytes``): the
fit is blind to a term its cases never moved apart, and a run with 1-token blocks must
still be refused for what it would hold. The margins: time x 1.5 (our choice: the
middle of the 3x band, on the slow side); memory x 1.1 (our choice: headroom for another
machine's allocator) over fits that already cover every measured peak.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import yaml
from scipy.optimize import linprog

from libra_des.config import load_scenario
from libra_des.kinds import feasibility, preflight

#: The time margin (our choice, see the docstring) and the memory headroom.
TIME_MARGIN = 1.5
MEMORY_HEADROOM = 1.1


def minimax_fit(rows: list[dict[str, float]], target: list[float],
                fixed: dict[str, float]) -> dict[str, float]:
    """Weights >= 0 (``start`` the constant; ``fixed`` weights held) minimising the largest
    relative error."""
    free = [k for k in ["start", *rows[0]] if k not in fixed]
    a, f = design(rows, target, free, fixed)
    k, n = a.shape[1], a.shape[0]
    # Variables: the free weights, then t; minimise t subject to |a w + f - 1| <= t.
    upper, lower = np.c_[a, -np.ones(n)], np.c_[-a, -np.ones(n)]
    res = linprog(np.r_[np.zeros(k), 1.0], A_ub=np.r_[upper, lower],
                  b_ub=np.r_[1.0 - f, f - 1.0], bounds=[(0, None)] * (k + 1), method="highs")
    return fixed | {n_: float(f"{w:.4g}") for n_, w in zip(free, res.x[:k], strict=True)}


def covering_fit(rows: list[dict[str, float]], target: list[float],
                 fixed: dict[str, float]) -> dict[str, float]:
    """Weights >= 0 (``fixed`` held) whose predictions are at or above every target, with the
    least summed ratio prediction / target."""
    free = [k for k in ["start", *rows[0]] if k not in fixed]
    a, f = design(rows, target, free, fixed)
    res = linprog(a.sum(axis=0), A_ub=-a, b_ub=f - 1.0, bounds=[(0, None)] * a.shape[1],
                  method="highs")
    # Rounded up, so rounding never drops an estimate below its peak.
    return fixed | {n_: float(f"{w * 1.001:.4g}") for n_, w in zip(free, res.x, strict=True)}


def design(rows: list[dict[str, float]], target: list[float], free: list[str],
           fixed: dict[str, float]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's free terms and its fixed terms' sum, both over its target."""
    full = [{"start": 1.0, **r} for r in rows]
    scale = np.array(target)
    a = np.array([[r[k] for k in free] for r in full]) / scale[:, None]
    f = np.array([sum(w * r[k] for k, w in fixed.items()) for r in full]) / scale
    return a, f


#: Paired cases that move one term apart from the rest: (case, its reference case, term).
MARGINALS = (("quickstart-small-blocks", "quickstart", "blocks"),
             ("quickstart-short-samples", "quickstart", "samples"))


def marginals(rows: list[dict[str, Any]], terms: dict[str, dict[str, float]],
              key: str, scale: float) -> dict[str, float]:
    """Per-item costs measured by a paired case: the difference over the term's change."""
    by = {r["case"]: r for r in rows}
    out = {}
    for case, ref, term in MARGINALS:
        if case in by and ref in by:
            extra = (by[case][key] - by[ref][key]) * scale
            out[term] = float(f"{max(extra, 0.0) / (terms[case][term] - terms[ref][term]):.4g}")
    return out


def fit(data: dict[str, Any], root: Path) -> None:
    """Fit ``data``'s coefficients (in place) from its ``measured`` list."""
    loaded = {row["case"]: load_scenario(root / "scenarios" / f"{row['scenario']}.yaml",
                                         row["set"]) for row in data["measured"]}
    fit_training(data, [r for r in data["measured"] if loaded[r["case"]].kind == "training"],
                 loaded)
    fit_moe(data, [r for r in data["measured"] if loaded[r["case"]].kind != "training"],
            loaded)
    data.pop("margin", None)
    data["seconds_margin"] = TIME_MARGIN
    for kind in ("training", "moe"):
        data[kind]["bytes_margin"] = 1.0
    preflight.DATA.write_text(yaml.safe_dump(data, sort_keys=False, width=100))
    preflight.coefficients.cache_clear()
    for kind in ("training", "moe"):
        worst = max(r["peak_mib"] * 2**20 / feasibility.estimate(loaded[r["case"]]).bytes
                    for r in data["measured"]
                    if (loaded[r["case"]].kind == "training") == (kind == "training"))
        data[kind]["bytes_margin"] = float(f"{worst * MEMORY_HEADROOM:.3g}")


def fit_training(data: dict[str, Any], rows: list[dict[str, Any]], loaded: dict[str, Any]
                 ) -> None:
    fast = [r for r in rows if loaded[r["case"]].fidelity == "fast"]
    terms = {r["case"]: preflight.training_terms(loaded[r["case"]]) for r in rows}
    steps = {r["case"]: loaded[r["case"]].steps for r in rows}
    time_w = minimax_fit([{k: v * steps[r["case"]] for k, v in terms[r["case"]].items()}
                          for r in fast], [r["cpu_s"] for r in fast], {})
    keep = {r["case"]: 1 + 0.1 * (steps[r["case"]] - 1) for r in rows}
    byte_w = covering_fit([{k: v * keep[r["case"]] for k, v in terms[r["case"]].items()}
                           for r in fast], [r["peak_mib"] * 2**20 for r in fast], {})
    section = {"start_s": time_w.pop("start"), "seconds": time_w,
               "start_bytes": byte_w.pop("start"), "bytes": byte_w,
               "floor_bytes": marginals(fast, terms, "peak_mib", 2.0**20)}
    detailed = [r for r in rows if loaded[r["case"]].fidelity == "detailed"]
    if len(detailed) >= 2:
        gpus, excess, extra_bytes = [], [], []
        for r in detailed:
            t = terms[r["case"]]
            fast_s = section["start_s"] + sum(time_w.get(k, 0) * v for k, v in t.items())
            fast_b = section["start_bytes"] + sum(byte_w.get(k, 0) * v for k, v in t.items())
            gpus.append(t["gpus"])
            excess.append(max(r["cpu_s"] - fast_s, 1e-3) / steps[r["case"]])
            extra_bytes.append(max(r["peak_mib"] * 2**20 - fast_b, 0.0) / t["gpus"])
        k, log_a = np.polyfit(np.log(gpus), np.log(excess), 1)
        section["fidelity"] = {"detailed": {
            "seconds_per_gpu": float(f"{np.exp(log_a):.4g}"),
            "gpu_exponent": float(f"{k:.4g}"),
            "bytes_per_gpu": float(f"{max(extra_bytes):.4g}")}}
    data["training"] = section


def fit_moe(data: dict[str, Any], rows: list[dict[str, Any]], loaded: dict[str, Any]) -> None:
    fast = [r for r in rows if loaded[r["case"]].fidelity == "fast"]
    terms = {r["case"]: preflight.moe_terms(loaded[r["case"]]) for r in rows}
    time_w = minimax_fit([terms[r["case"]] for r in fast], [r["cpu_s"] for r in fast], {})
    byte_w = covering_fit([terms[r["case"]] for r in fast],
                          [r["peak_mib"] * 2**20 for r in fast], {})
    section: dict[str, Any] = {"start_s": time_w.pop("start"), "seconds": time_w,
                               "start_bytes": byte_w.pop("start"), "bytes": byte_w}
    detailed = [r for r in rows if loaded[r["case"]].fidelity == "detailed"]
    if detailed:
        per = []
        for r in detailed:
            t = terms[r["case"]]
            fast_s = section["start_s"] + sum(time_w.get(k, 0) * v for k, v in t.items())
            ep = loaded[r["case"]].parallelism.ep
            per.append(max(r["cpu_s"] - fast_s, 0.0) / (t["gpu_layers"] * ep))
        section["fidelity"] = {"detailed": {"seconds_per_gpu_layer": float(f"{max(per):.4g}")}}
    data["moe"] = section
