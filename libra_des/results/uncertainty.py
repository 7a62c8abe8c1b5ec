"""How much of a prediction rests on measured numbers: ``result.json``'s ``model_uncertainty``.

Per op the profile's fits carry their cross-validated error (``cv_p90_abs_pct_error``: the 90th
percentile of |predicted / measured - 1| when each size was left out of its fit;
``hardware/profiles/fitting.py``). This module spreads those errors over a run's time.

Buckets. A run's time is split into buckets read from its own result, each priced by one op
family at one tier (measured / borrowed / datasheet / assumed):

* training (per-GPU mean seconds of one step): ``attention`` (attention compute), ``collectives``
  (communication on the critical path: ``comm_exposed_fraction`` of the step; its tier is the
  worst of ``comm_tiers``), and ``gemm`` (the rest of the step: linear and expert GEMMs and the
  waits and bubbles they shape). This split is coarse: it is what the result records;
* MoE (one layer's critical path): each stage's exposed seconds (``layer_breakdown_s``) at the
  tier ``cost_sources`` gives it.

Propagation rule. If the time is (to first order) a sum of the buckets' times on the critical
path and bucket ``i`` holds share ``s_i`` with relative error ``e_i``, the step's relative error
is ``sum(s_i e_i)`` when the errors are fully correlated (a bound: every op off in the same
direction; it is at most ``max e_i``) and ``sqrt(sum((s_i e_i)^2))`` when they are
independent. Both are reported over the buckets at the ``measured`` tier, whose error is the
largest p90 CV error among the profile's fits of that op (conservative: the result does not
record which group size priced which call; a bucket at another tier gets none). Buckets at the
other tiers have no measured error: their share is reported instead (``datasheet_share``:
datasheet and assumed numbers; ``borrowed_share``: constants fitted on another op, algorithm or
device), and the band does not cover them. A borrowed profile (``profile_scope: borrowed``) was
measured on another GPU: its errors are those of that GPU, so the band is a lower bound there.

Profiled range. A collective whose largest call (``comm_choices``' bytes) lies outside the
sizes its fits were measured at is listed per op (an extrapolation of the curve).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from libra_des.hardware.profiles.profile import COLLECTIVE_OPS, Fit, Profile

#: Tiers whose numbers are no measurement of this op (they count toward ``datasheet_share``).
UNMEASURED = ("datasheet", "assumed")
#: Worst first: a bucket priced by several ops takes the worst tier among them.
TIER_ORDER = ("assumed", "datasheet", "borrowed", "measured")
#: MoE stages priced by a collective's fits (the rest are kernels or host work).
MOE_COMM_STAGES = ("dispatch", "combine", "replica_copy", "metadata")


def op_error(fits: Sequence[Fit], ops: Sequence[str]) -> float | None:
    """The largest p90 CV error (percent) among the fits of ``ops``; None without one."""
    errs = [f.cv_p90_abs_pct_error for f in fits
            if f.op in ops and f.cv_p90_abs_pct_error is not None]
    return max(errs) if errs else None


def worst(tiers: Sequence[str]) -> str:
    known = [t for t in tiers if t in TIER_ORDER]
    return min(known, key=TIER_ORDER.index) if known else "measured"


def training_buckets(result: Mapping[str, Any], profile: Profile) -> list[dict[str, Any]]:
    """(name, seconds, tier, error) of a training step's coarse buckets (module docstring)."""
    step = float((result.get("step_time_s") or {}).get("mean", 0.0))
    if step <= 0:
        return []  # an attention-only run records no step
    attention = min(float(result.get("attention_compute_s", 0.0)), step)
    comm = min(float(result.get("comm_exposed_fraction", 0.0)) * step, step - attention)
    tiers = dict(result.get("comm_tiers") or {})
    has = {f.op for f in profile.fits}
    comm_ops = tuple(tiers) or COLLECTIVE_OPS
    return [
        {"bucket": "attention", "ops": ["attention"], "seconds": attention,
         "tier": "measured" if "attention" in has else "datasheet",
         "error_pct": op_error(profile.fits, ("attention",))},
        {"bucket": "collectives", "ops": sorted(tiers), "seconds": comm,
         "tier": worst(list(tiers.values())), "error_pct": op_error(profile.fits, comm_ops)},
        {"bucket": "gemm", "ops": ["gemm", "grouped_gemm"],
         "seconds": max(step - attention - comm, 0.0),
         "tier": "measured" if "gemm" in has else "datasheet",
         "error_pct": op_error(profile.fits, ("gemm", "grouped_gemm"))},
    ]


def moe_buckets(result: Mapping[str, Any], profile: Profile) -> list[dict[str, Any]]:
    """Each MoE stage's exposed seconds of one layer at its ``cost_sources`` tier."""
    sources = dict(result.get("cost_sources") or {})
    out = []
    for stage, parts in sorted((result.get("layer_breakdown_s") or {}).items()):
        out.append({"bucket": stage, "ops": [stage],
                    "seconds": float(parts.get("exposed", 0.0)),
                    "tier": str(sources.get(stage, "assumed")),
                    "error_pct": op_error(profile.fits, stage_ops(stage))})
    return out


def stage_ops(stage: str) -> tuple[str, ...]:
    """The profile ops whose fits price an MoE stage (collectives, grouped GEMM, attention,
    else GEMM)."""
    if stage in MOE_COMM_STAGES:
        return COLLECTIVE_OPS
    if stage.startswith("moe_"):
        return ("grouped_gemm",)
    return ("attention",) if stage == "attention" else ("gemm",)


def outside_range(result: Mapping[str, Any], fits: Sequence[Fit]) -> list[str]:
    """One line per collective whose largest call lies outside its fits' measured sizes."""
    lines = []
    for op, choice in sorted((result.get("comm_choices") or {}).items()):
        size = choice.get("bytes") if isinstance(choice, Mapping) else None
        mine = [f for f in fits if f.op == op and f.size_min is not None
                and f.size_max is not None]
        if not size or not mine:
            continue
        low = min(float(f.size_min or 0.0) for f in mine)
        high = max(float(f.size_max or 0.0) for f in mine)
        if not low <= float(size) <= high:
            lines.append(f"{op}: largest call {float(size):.3g} B outside the profiled "
                         f"{low:.3g}-{high:.3g} B (the fit is extrapolated)")
    return lines


def model_band(result: Mapping[str, Any], profile: Profile, borrowed: bool) -> dict[str, Any]:
    """``model_uncertainty`` of a result priced with ``profile`` (module docstring)."""
    moe = "layer_breakdown_s" in result  # an MoE result (kind moe_inference) records stages
    buckets = (moe_buckets if moe else training_buckets)(result, profile)
    total = sum(b["seconds"] for b in buckets) or 1.0
    for b in buckets:
        b["share"] = b["seconds"] / total
        if b["tier"] != "measured":
            b["error_pct"] = None  # another op's or device's error says nothing of this one
    covered = [b for b in buckets if b["tier"] == "measured" and b["error_pct"] is not None]
    correlated = sum((b["share"] * b["error_pct"] for b in covered), 0.0)
    independent = math.sqrt(sum((b["share"] * b["error_pct"]) ** 2 for b in covered))
    uncovered = [b for b in buckets if b not in covered and b["seconds"] > 0]
    return {
        "rule": "share-weighted p90 CV error of the measured buckets: fully correlated "
                "sum(s*e) (a bound), independent sqrt(sum((s*e)^2)); other tiers uncovered",
        "band_pct_correlated": correlated,
        "band_pct_independent": independent,
        "covered_share": sum((b["share"] for b in covered), 0.0),
        "datasheet_share": sum((b["share"] for b in buckets if b["tier"] in UNMEASURED), 0.0),
        "borrowed_share": sum((b["share"] for b in buckets if b["tier"] == "borrowed"), 0.0),
        "uncovered": sorted(b["bucket"] for b in uncovered),
        "borrowed_profile": borrowed,
        "outside_profiled_range": outside_range(result, profile.fits),
        "buckets": buckets,
    }
