"""A profile's measurements replayed through the cost model (``libra-des validate``).

Every measured sample of the profile is priced by :class:`~libra_des.hardware.costs.CostModel`
built from that profile on its own machine (``interconnect.fabric``), exactly as a simulation
would ask: collectives through ``collective`` (the algorithm the model picks), attention
through ``attention_docs``, GEMMs through ``gemm`` and grouped GEMMs through ``grouped_gemm``.
Errors are ``|predicted / measured - 1|`` against the measured median, per op and group.

``kind`` says what the replay tests: ``in_sample`` when the profile holds a fit for that op,
group and layout (for harness and import output, fitted on these very samples: the replay
then checks the fit and the simulator's curve lookup, not generalisation); ``predicted``
when it does not (e.g. grouped GEMMs priced with borrowed constants, or a group size whose
curve is borrowed from a neighbour): a genuine out-of-sample prediction.

Grouped-GEMM samples (the calibration harness, ``profile import --format grouped-gemm-csv``)
hold the per-expert shape in ``gemm`` and the number of experts in ``group``; every expert
gets the same rows unless ``gemm.rows`` lists them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from libra_des.base.numbers import with_unit
from libra_des.errors import InputError
from libra_des.hardware.costs import CostModel
from libra_des.hardware.profiles.fitting import group_key, pct_errors
from libra_des.hardware.profiles.profile import COLLECTIVE_OPS, Profile, Sample

KERNEL_REPLAY_OPS = ("attention", "gemm", "grouped_gemm")


@dataclass(frozen=True)
class Replay:
    """One sample priced by the model: measured and predicted seconds, the algorithm chosen
    (collectives) and a short description of the case for the worst-case column."""

    sample: Sample
    predicted: float
    algorithm: str | None
    case: str

    @property
    def measured(self) -> float:
        return self.sample.time.median


def cost_model(profile: Profile) -> CostModel:
    """The profile's own machine, with as many nodes as its widest measured group needs."""
    nodes = max(
        (
            math.ceil(s.group / min(s.gpus_per_node or s.group, s.group))
            for s in profile.samples
            if s.op in COLLECTIVE_OPS
        ),
        default=1,
    )
    return CostModel(profile, profile.interconnect.fabric(nodes))


def replay_sample(model: CostModel, s: Sample, where: str) -> Replay:
    if s.op in COLLECTIVE_OPS:
        if s.nbytes is None:
            raise InputError(f"{where}.nbytes", None, "a byte size for a collective sample")
        cost = model.collective(s.op, s.nbytes, s.group, s.gpus_per_node)
        return Replay(s, cost.seconds, cost.algorithm, with_unit(float(s.nbytes), "B"))
    if s.op == "attention" and s.attention is not None:
        a = s.attention
        lengths = np.repeat([d[0] for d in a.docs], [d[1] for d in a.docs])
        secs = model.attention_docs(lengths, a.heads_q, a.heads_kv, a.head_dim, cp=a.cp)
        docs = "+".join(f"{count}x{length}" for length, count in a.docs)
        return Replay(s, secs, None, f"{docs} h{a.heads_q}/{a.heads_kv} d{a.head_dim} cp{a.cp}")
    if s.op in ("gemm", "grouped_gemm") and s.gemm is not None:
        g = s.gemm
        if s.op == "gemm":
            secs = float(model.gemm(g.m, g.n, g.k, g.dtype))
            return Replay(s, secs, None, f"{g.m}x{g.n}x{g.k} {g.dtype}")
        secs = model.grouped_gemm(np.array(g.expert_rows(s.group)), g.n, g.k, g.dtype)
        return Replay(s, secs, None, f"{s.group} experts x {g.m}x{g.n}x{g.k} {g.dtype}")
    allowed = " | ".join((*COLLECTIVE_OPS, *KERNEL_REPLAY_OPS))
    raise InputError(f"{where}.op", s.op, f"{allowed} (with its shape: nbytes, attention, gemm)")


def replay(profile: Profile) -> list[Replay]:
    """Every measured sample of ``profile`` priced by the model of its own machine."""
    if not profile.samples:
        raise InputError(
            "profile.samples",
            "none",
            "a profile with measured samples (harness output, or `profile import` without "
            "--strip-samples)",
        )
    model = cost_model(profile)
    return [replay_sample(model, s, f"samples[{i}]") for i, s in enumerate(profile.samples)]


def fitted_keys(profile: Profile) -> set[tuple[str, int, int, str]]:
    """Keys (as :func:`group_key` builds them) of the groups the profile holds a fit for."""
    keys = set()
    for f in profile.fits:
        if f.op in COLLECTIVE_OPS:
            keys.add((f.op, f.group, min(f.gpus_per_node or f.group, f.group), ""))
        else:
            keys.add((f.op, 1, 1, f.dtype or ""))
    return keys


def summarise(profile: Profile, replays: list[Replay]) -> list[dict[str, object]]:
    """One row per (op, group, layout, dtype): n, median / p90 / worst absolute % error."""
    groups: dict[tuple[str, int, int, str], list[Replay]] = defaultdict(list)
    for r in replays:
        groups[group_key(r.sample)].append(r)
    fitted = fitted_keys(profile)
    rows = []
    for key, rs in sorted(groups.items()):
        measured = np.array([r.measured for r in rs])
        predicted = np.array([r.predicted for r in rs])
        errs = pct_errors(predicted, measured)
        worst = rs[int(np.argmax(errs))]
        algs = sorted({r.algorithm for r in rs if r.algorithm})
        rows.append(
            {
                "op": key[0],
                "group": key[1],
                "gpus_per_node": key[2],
                "algorithm": "/".join(algs) or None,
                "dtype": key[3] or None,
                "kind": "in_sample" if key in fitted else "predicted",
                "n": len(rs),
                "median_abs_pct_error": round(float(np.median(errs)), 4),
                "p90_abs_pct_error": round(float(np.percentile(errs, 90)), 4),
                "worst_abs_pct_error": round(float(errs.max()), 4),
                "median_signed_pct_error": round(
                    float(np.median(predicted / measured - 1) * 100), 4
                ),
                "worst_case": {
                    "case": worst.case,
                    "measured_s": float(f"{worst.measured:.6g}"),
                    "predicted_s": float(f"{worst.predicted:.6g}"),
                },
            }
        )
    return rows
