"""MoE prefill at fast versus detailed fidelity on the shipped MoE scenarios.

Prints, per scenario and system, the mean MoE layer time, the exposed dispatch and combine
per layer, and the wall time of both modes (same plans, same seed). The differences are
discussed in docs/communication.md ("Fast and detailed fidelity"). Not a test.

    python benchmarks/moe_fidelity.py [--scenarios a,b] [--policies p,q] [--set key=value ...]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from libra_des.config import ROOT, load_scenario
from libra_des.results.moe_metrics import simulate_moe

SCENARIOS = (
    "paper-moe-breakdown",
    "moe-ep-2node-h100-ib-ndr",
    "moe-ep-2node-h200-roce-railopt",
    "moe-ep-4node-h100-ib-ndr",
    "moe-ep-4node-h200-roce-railopt",
)
#: Cut to a few layers and one batch so the whole table takes minutes, not hours.
REDUCED = ["model.layers=6", "workload.batches=1"]


def figures(name: str, policy: str, fidelity: str, extra: list[str]) -> dict[str, float]:
    scenario = load_scenario(ROOT / "scenarios" / f"{name}.yaml",
                             [*REDUCED, f"balancer.policy={policy}", f"fidelity={fidelity}",
                              *extra])
    began = time.perf_counter()
    res = simulate_moe(scenario, np.random.default_rng(scenario.seed))
    parts = res["layer_breakdown_s"]
    return {
        "layer": res["moe_layer_s"],
        "dispatch": parts["dispatch"]["exposed"],
        "combine": parts["combine"]["exposed"],
        "wall": time.perf_counter() - began,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--policies", default="sglang,libra")
    parser.add_argument("--set", action="append", default=[])
    args = parser.parse_args()
    keys = ("layer", "dispatch", "combine", "wall")
    print(f"{'scenario':<32}{'system':<8}" + "".join(f"{k + ' f/d':>22}" for k in keys)
          + f"{'layer d/f':>10}")
    for name in args.scenarios.split(","):
        for policy in args.policies.split(","):
            fast = figures(name, policy, "fast", args.set)
            det = figures(name, policy, "detailed", args.set)
            cells = "".join(f"{fast[k]:>11.4g}{det[k]:>11.4g}" for k in keys)
            ratio = det["layer"] / fast["layer"]
            print(f"{name:<32}{policy:<8}{cells}{ratio:>10.4f}", flush=True)


if __name__ == "__main__":
    main()
