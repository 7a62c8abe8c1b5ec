"""The report's headline: each run's speed-up over its baseline, as the terminal prints it.

``libra-des quickstart`` prints "Libra Full step-time speed-up over Ulysses": Ulysses' mean
step time over Libra's. The page states the same ratio for every run of a report: the
baseline's time (:data:`SPEEDUP`: the kind's time metric, lower is better) over the run's.

* Runs side by side: the baseline is the run of the kind's baseline system (Ulysses for
  training, SGLang, the paper's no-balancing system, for MoE prefill); with none among the
  runs, the first run by name, and the page says so.
* A sweep that varies ``balancer.policy``: each point over the baseline system's point with
  the same values on every other axis. A sweep that does not vary the system has no speed-up.

A speed-up that is not a finite positive number (a zero or missing time) is not shown.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Per scenario kind: (time metric, lower is better; baseline system; the words before
#: "speed-up"). The time is what the paper's headline ratio divides.
SPEEDUP: dict[str, tuple[str, str, str]] = {
    "training": ("step_time_s.mean", "ulysses", "step-time"),
    "moe_inference": ("prefill_s", "sglang", "prefill-time"),
}
#: The override key that names a run's system.
POLICY = "balancer.policy"


@dataclass(frozen=True)
class Speedups:
    """Speed-up per run or point name, over ``baseline`` (a run name or a system), in words."""

    label: str  # e.g. "step-time speed-up over ulysses"
    values: dict[str, float]
    note: str = ""  # why a baseline was chosen, or why there is none


def lookup(data: Mapping[str, Any] | None, dotted: str) -> Any:
    """The value at a dotted path of a nested mapping (None where a part is missing)."""
    node: Any = data
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def policy_of(result: Mapping[str, Any]) -> str | None:
    value = lookup(result, "scenario.balancer.policy") or result.get("policy")
    return value if isinstance(value, str) else None


def ratio(base: Any, time: Any) -> float | None:
    """``base / time`` when both are positive finite numbers, else None."""
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (base, time)):
        return None
    if not (time > 0 and base > 0):
        return None
    out = float(base) / float(time)
    return out if math.isfinite(out) else None


def of_runs(kind: str, results: Mapping[str, Mapping[str, Any]]) -> Speedups | None:
    """Each run's speed-up over the baseline run (None with fewer than two runs or an unknown
    kind)."""
    if kind not in SPEEDUP or len(results) < 2:
        return None
    metric, system, words = SPEEDUP[kind]
    base = next((n for n, r in results.items() if policy_of(r) == system), None)
    note = ""
    if base is None:
        base = sorted(results)[0]
        note = f"no {system} run among these; the baseline is the first run, {base}"
    values = {n: v for n, r in results.items()
              if (v := ratio(lookup(results[base], metric), lookup(r, metric))) is not None}
    label = f"{words} speed-up over {system if not note else base}"
    return Speedups(label, values, note)


def of_sweep(kind: str, rows: Sequence[Mapping[str, Any]], axes: Sequence[str]) -> Speedups | None:
    """Each point's speed-up over the baseline system's point with the same other-axis values
    (None when the sweep does not vary ``balancer.policy`` or lacks the baseline system)."""
    if kind not in SPEEDUP or POLICY not in axes:
        return None
    metric, system, words = SPEEDUP[kind]
    others = [a for a in axes if a != POLICY]

    def key(row: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(row.get(a) for a in others)

    bases = {key(r): r for r in rows if r.get(POLICY) == system}
    if not bases:
        return Speedups(f"{words} speed-up over {system}", {},
                        f"the sweep has no {system} point to compare with")
    values = {}
    for row in rows:
        base = bases.get(key(row))
        v = ratio(base.get(metric), row.get(metric)) if base else None
        if v is not None:
            values[str(row["id"])] = v
    return Speedups(f"{words} speed-up over {system}", values)
