"""Set the preflight's coefficients from measured runs (``preflight_check.py --fit``).

Per kind, the fast-fidelity cases fit ``seconds = start + sum(w_k * term_k)`` by
non-negative least squares on relative error (each row divided by its measurement, so a
1 s case weighs as much as a 100 s one), and the same for peak memory. A fidelity's own
cost (``detailed``) is then the measured excess over that fast prediction, fitted as a power
of the GPUs (training) or per EP GPU-layer x EP (MoE). The margins: time x 1.5 (our choice:
the middle of the 3x band the check allows, on the slow side), memory x each kind's largest
peak / prediction ratio among its cases, plus 10% (so every measured peak is covered).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import yaml
from scipy.optimize import nnls

from libra_des.config import load_scenario
from libra_des.kinds import preflight

#: The time margin (our choice, see the docstring) and the memory headroom.
TIME_MARGIN = 1.5
MEMORY_HEADROOM = 1.1


def nonneg_fit(rows: list[dict[str, float]], target: list[float]) -> dict[str, float]:
    """Weights >= 0 (``start`` the constant) minimising the relative error of the rows."""
    names = ["start", *rows[0]]
    a = np.array([[1.0, *r.values()] for r in rows]) / np.array(target)[:, None]
    weights, _ = nnls(a, np.ones(len(rows)))
    return {n: float(f"{w:.4g}") for n, w in zip(names, weights, strict=True)}


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
        worst = max(r["peak_mib"] * 2**20 / preflight.estimate(loaded[r["case"]]).bytes
                    for r in data["measured"]
                    if (loaded[r["case"]].kind == "training") == (kind == "training"))
        data[kind]["bytes_margin"] = float(f"{worst * MEMORY_HEADROOM:.3g}")


def fit_training(data: dict[str, Any], rows: list[dict[str, Any]], loaded: dict[str, Any]
                 ) -> None:
    fast = [r for r in rows if loaded[r["case"]].fidelity == "fast"]
    terms = {r["case"]: preflight.training_terms(loaded[r["case"]]) for r in rows}
    steps = {r["case"]: loaded[r["case"]].steps for r in rows}
    time_w = nonneg_fit([{k: v * steps[r["case"]] for k, v in terms[r["case"]].items()}
                         for r in fast], [r["cpu_s"] for r in fast])
    keep = {r["case"]: 1 + 0.1 * (steps[r["case"]] - 1) for r in rows}
    byte_w = nonneg_fit([{k: v * keep[r["case"]] for k, v in terms[r["case"]].items()}
                         for r in fast], [r["peak_mib"] * 2**20 for r in fast])
    section = {"start_s": time_w.pop("start"), "seconds": time_w,
               "start_bytes": byte_w.pop("start"), "bytes": byte_w}
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
    time_w = nonneg_fit([terms[r["case"]] for r in fast], [r["cpu_s"] for r in fast])
    byte_w = nonneg_fit([terms[r["case"]] for r in fast],
                        [r["peak_mib"] * 2**20 for r in fast])
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
