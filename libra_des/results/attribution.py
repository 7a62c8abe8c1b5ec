"""Why run A beats run B: two training results' step times and attention stragglers, their
difference split into parts that add up to the measured difference.

Each run records its own split (``result.json``'s ``attribution``; the parts and their
definitions are in :mod:`libra_des.sim.training.attribution`): the parts of one run sum to its
step time (and to its mean attention straggler). The difference of two runs is then the
difference part by part, except exposed communication, which is a product of the bytes moved
and the exposed seconds per byte (``rate``): its solo-priced difference is split exactly by
the symmetric (midpoint) rule, ``dE = dB (r_a + r_b) / 2 + (B_a + B_b) / 2 dr``. What the parts
leave of the measured difference is reported as ``unexplained`` (rounding only: the check
allows 1e-9 of the difference) and never folded into a part.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from libra_des.errors import InputError
from libra_des.sim.training.attribution import PARTS, StepParts

#: The measures split, as ``result.json`` names them (each has a ``mean``).
MEASURES = ("step_time_s", "attention_straggler_s")
#: The parts of a difference: the run's parts with exposed communication split in two.
COMPONENTS = tuple(c for p in PARTS
                   for c in (("comm_bytes", "comm_rate") if p == "comm_exposed" else (p,)))
#: The scenario sections that must agree for two runs to be compared (cluster and workload).
SAME = ("topology", "topology_params", "profile", "parallelism", "model", "workload")
#: How closely the parts must add up to the measured difference (relative to it); a
#: difference below the absolute floor (relative to the runs' values) is rounding.
REL_TOL, ABS_FLOOR = 1e-9, 1e-12


def attribution_keys(parts: Sequence[StepParts | None]) -> dict[str, Any]:
    """``attribution`` of ``result.json``: the steps' parts averaged (the step time's per
    step, the straggler's per forward call over all steps) and the bytes behind them."""
    if not parts or any(p is None for p in parts):
        return {}
    steps = [p for p in parts if p is not None]
    calls = sum(p.calls for p in steps)

    def per_call(key: str) -> float:
        return math.fsum(p.straggler[key] for p in steps) / calls if calls else 0.0

    call_bytes = (math.fsum(p.call_bytes * p.calls for p in steps) / calls) if calls else 0.0
    return {"attribution": {
        "step_time_s": {k: float(np.mean([p.step[k] for p in steps])) for k in PARTS},
        "attention_straggler_s": {k: per_call(k) for k in PARTS},
        "comm_bytes": {"step_time_s": float(np.mean([p.step_bytes for p in steps])),
                       "attention_straggler_s": call_bytes},
    }}


@dataclass(frozen=True)
class Split:
    """One measure's difference (A minus B) and its components."""

    measure: str
    a: float
    b: float
    components: dict[str, float]

    @property
    def difference(self) -> float:
        return self.a - self.b

    @property
    def unexplained(self) -> float:
        """The measured difference minus the components' sum (rounding only)."""
        return self.difference - math.fsum(self.components.values())

    @property
    def adds_up(self) -> bool:
        floor = ABS_FLOOR * max(abs(self.a), abs(self.b))
        return abs(self.unexplained) <= max(REL_TOL * abs(self.difference), floor)

    def as_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "difference": self.difference,
                "components": dict(self.components), "unexplained": self.unexplained,
                "adds_up": self.adds_up}


@dataclass(frozen=True)
class Explanation:
    """Run A against run B: each measure's split, and what the runs are."""

    a: str
    b: str
    policies: tuple[str, str]
    splits: tuple[Split, ...] = field(default_factory=tuple)

    @property
    def adds_up(self) -> bool:
        return all(s.adds_up for s in self.splits)

    def as_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "policies": list(self.policies),
                "adds_up": self.adds_up, **{s.measure: s.as_dict() for s in self.splits}}


def check_pair(a: Mapping[str, Any], b: Mapping[str, Any], names: tuple[str, str]) -> None:
    """Refuse (InputError) what cannot be compared: a result that is not training's, one
    without a recorded split, two runs of different clusters or workloads."""
    for name, res in zip(names, (a, b), strict=True):
        # Only training runs record their split; any other kind has none to compare.
        if not isinstance(res.get("attribution"), Mapping):
            kind = res.get("kind")
            raise InputError(name, f"a {kind} result without attribution" if kind else
                             "a result without attribution",
                             "a training result.json written by this version (rerun it)")
    sa, sb = a.get("scenario", {}), b.get("scenario", {})
    for key in SAME:
        if sa.get(key) != sb.get(key):
            raise InputError(f"{names[1]}: scenario.{key}", "differs from the first result's",
                             "two runs of the same cluster and workload")


def explain_results(a: Mapping[str, Any], b: Mapping[str, Any],
                    names: tuple[str, str] = ("RESULT_A", "RESULT_B"),
                    components: Sequence[str] | None = None) -> Explanation:
    """A's step time and attention straggler against B's, split (module docstring).

    ``components``: which to keep (all by default; the sum check then covers only those,
    and fails unless the rest are zero)."""
    check_pair(a, b, names)
    wanted = tuple(COMPONENTS if components is None else components)
    unknown = [c for c in wanted if c not in COMPONENTS]
    if unknown:
        raise InputError("--components", ",".join(unknown), ", ".join(COMPONENTS))
    splits = []
    for measure in MEASURES:
        comp = difference(a["attribution"], b["attribution"], measure)
        splits.append(Split(measure, float(a[measure]["mean"]), float(b[measure]["mean"]),
                            {k: v for k, v in comp.items() if k in wanted}))
    return Explanation(names[0], names[1], (str(a.get("policy")), str(b.get("policy"))),
                       tuple(splits))


def difference(a: Mapping[str, Any], b: Mapping[str, Any], measure: str) -> dict[str, float]:
    """A's parts minus B's for one measure, exposed communication split by bytes and rate."""
    pa, pb = a[measure], b[measure]
    out: dict[str, float] = {}
    for part in PARTS:
        if part == "comm_exposed":
            by_bytes, by_rate = bytes_and_rate(
                (float(pa[part]), float(a["comm_bytes"][measure])),
                (float(pb[part]), float(b["comm_bytes"][measure])))
            out["comm_bytes"], out["comm_rate"] = by_bytes, by_rate
        else:
            out[part] = float(pa[part]) - float(pb[part])
    return out


def bytes_and_rate(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    """(seconds, bytes) of A and B -> the seconds' difference due to bytes and to rate
    (exposed seconds per byte), by the midpoint rule; exact: the two add up to the difference.
    A run that moves no bytes has no rate: the whole difference is then the bytes'."""
    (ea, ba), (eb, bb) = a, b
    if ba <= 0 or bb <= 0:
        return ea - eb, 0.0
    ra, rb = ea / ba, eb / bb
    return (ba - bb) * (ra + rb) / 2.0, (ba + bb) / 2.0 * (ra - rb)


def explain_pairs(results: Mapping[str, Mapping[str, Any]]) -> list[Explanation]:
    """The pairs among named runs a report shows: the fastest run (lowest mean step time)
    that has a comparable run against every other run with a recorded split of the same
    cluster and workload (others left out): why the winner wins."""
    runs = {n: r for n, r in results.items() if isinstance(r.get("attribution"), dict)}

    def mean(name: str) -> float:
        return float((runs[name].get("step_time_s") or {}).get("mean", float("inf")))

    for first in sorted(runs, key=mean):
        out = []
        for name, res in runs.items():
            if name == first:
                continue
            try:
                out.append(explain_results(runs[first], res, (first, name)))
            except InputError:
                continue  # another cluster or workload: nothing to attribute
        if out:
            return out
    return []
