"""How each balancer's step time moves with runtime variance (the variance study).

Core-attention microbenchmark of the 256K corpus (``paper-attention-microbench-256k``: 32
query heads, DP 16 x CP 4, Libra pools of P = 8, DistCA one pool of all 16 replicas), cut to
8 layers and 3 steps, TAP at fixed (H, B) = (8, 32K) (what ``auto`` picks for this scenario)
so that every point plans the same tiles. One knob moves at a time from a noiseless baseline:

* ``noise_sigma``: per-GPU per-op lognormal jitter;
* ``slow_gpu_fraction``: GPUs slowed by 1.5x for the whole run;
* ``failslow_rate``: chance per GPU per step that a 1.5x fail-slow episode starts (mean 5
  steps long);
* the structured sources (hardware/variance/fleet_variance.py): ``gpu_speed_sigma`` (persistent
  per-GPU speed), ``jitter_node_correlation`` (with the calibrated 1.15% jitter on),
  ``node_episode_rate`` and ``rack_episode_rate`` (1.5x episodes of a whole node or rack);
* the link and host sources (hardware/variance/link_host_variance.py): ``link_jitter_sigma``
  (per-transfer link jitter, rack-correlated at the fleet default), ``link_episode_rate``
  (2x link degradation episodes, mean 100 steps), ``launch_gap_seconds`` (mean host gap per
  layer call) and ``host_stall_rate`` (50 ms garbage-collection / data-loader stalls per GPU
  per pipeline op);
* ``fleet``: every structured, link and host source at its fleet default (docs/variance.md),
  together.

Reported per policy and point: mean step time over seeds, and its ratio to the policy's own
noiseless step (the *exposure*). Output: JSON (``--out``), read by
``paper_figs/libra_train/variance_sensitivity.py``.

    .venv/bin/python benchmarks/variance_sensitivity.py [--seeds 3] [--out runs/variance.json]
        [--knobs link_jitter_sigma,fleet]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from libra_des.config import ROOT, load_scenario
from libra_des.kinds.simulation import simulate

SCENARIO = ROOT / "scenarios" / "paper-attention-microbench-256k.yaml"
# The paper median/p99 length law the study's documented figures were measured on (the
# scenario now defaults to the corpus law; docs/variance.md).
BASE = ["workload=longctx-256k", "model.layers=8", "steps=3", "parallelism.gbs=32",
        "balancer.heads_split=8",
        "balancer.block_size=32768", "memory.check=warn",
        # DP groups one replica per node until the layout fix lands: 16 nodes for DP 16.
        "topology_params.nodes=16"]
QUIET = ["variance.noise_sigma=0", "variance.failslow_rate=0", "variance.slow_gpu_fraction=0"]
POLICIES = ("ulysses", "wlb_llm", "distca", "libra")
KNOBS: dict[str, tuple[list[float], list[str]]] = {
    "noise_sigma": ([0.0, 0.0115, 0.03, 0.06, 0.1], []),
    "slow_gpu_fraction": ([0.0, 0.01, 0.03, 0.1], ["variance.slow_factor=1.5"]),
    "failslow_rate": ([0.0, 5e-4, 5e-3, 2e-2], ["variance.failslow_factor=1.5"]),
    "gpu_speed_sigma": ([0.0, 0.013, 0.03, 0.06], []),
    "jitter_node_correlation": ([0.0, 0.3, 0.6, 1.0], ["variance.noise_sigma=0.0115"]),
    "node_episode_rate": ([0.0, 2e-4, 2e-3, 2e-2], ["variance.node_episode_factor=1.5"]),
    "rack_episode_rate": ([0.0, 5e-5, 5e-4, 5e-3], ["variance.rack_episode_factor=1.5"]),
    "link_jitter_sigma": ([0.0, 0.02, 0.05, 0.1], ["variance.link_jitter_correlation=0.3"]),
    "link_episode_rate": ([0.0, 1e-4, 1e-3, 1e-2], ["variance.link_episode_factor=2.0"]),
    "launch_gap_seconds": ([0.0, 1e-5, 1e-4, 1e-3], []),
    "host_stall_rate": ([0.0, 1e-3, 1e-2, 5e-2], ["variance.host_stall_seconds=0.05"]),
    "fleet": ([0.0, 1.0], []),
}


def setting(knob: str, value: float) -> str:
    """The --set line of one point (``fleet`` is a switch)."""
    if knob == "fleet":
        return f"variance.fleet={'true' if value else 'false'}"
    return f"variance.{knob}={value}"


def step_time(policy: str, sets: list[str], seed: int) -> float:
    sc = load_scenario(SCENARIO, [*BASE, *QUIET, *sets, f"balancer.policy={policy}",
                                  f"seed={seed}"])
    res, _ = simulate(sc)
    return float(res["step_time_s"]["mean"])


def study(seeds: int, knobs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"scenario": SCENARIO.name, "base": BASE, "seeds": seeds, "knobs": {}}
    for knob in knobs:
        values, extra = KNOBS[knob]
        rows: dict[str, list[float]] = {}
        for policy in POLICIES:
            rows[policy] = [
                float(np.mean([step_time(policy, [*extra, setting(knob, v)], s)
                               for s in range(seeds)]))
                for v in values
            ]
            print(f"{knob:18s} {policy:8s} " + " ".join(f"{t:8.3f}" for t in rows[policy])
                  + "  exposure " + " ".join(f"{t / rows[policy][0]:.3f}"
                                             for t in rows[policy]), flush=True)
        out["knobs"][knob] = {
            "values": values,
            "step_time_s": rows,
            "exposure": {p: [t / r[0] for t in r] for p, r in rows.items()},
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("runs/variance_sensitivity.json"))
    parser.add_argument("--knobs", default=",".join(KNOBS),
                        help="comma-separated knobs to move (default: all)")
    args = parser.parse_args()
    knobs = [k for k in args.knobs.split(",") if k]
    unknown = [k for k in knobs if k not in KNOBS]
    if unknown:
        parser.exit(2, f"error: --knobs: got {unknown[0]!r}; allowed: {', '.join(KNOBS)}\n")
    data = study(args.seeds, knobs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
