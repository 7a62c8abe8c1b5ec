"""How Libra degrades as its predictor gets worse (degradation).

For each seed, one routing trace (the paper's breakdown setting: Qwen3-235B, batch 32 x 1024
tokens, mixed stream) is generated once and served by SGLang and by Libra with the lookahead
predictor forced to accuracy a = 1.0, 0.9, ..., 0.1, with misses biased towards popular
experts (the default) and towards random experts. Prints, per accuracy, the mean over seeds
(± standard error) of Libra's throughput gain over SGLang, the replica waste fraction (replicas
that computed no pairs), the share of pairs the replicas absorbed, and the imbalance ratio.

    .venv/bin/python benchmarks/moe_accuracy_sweep.py [--seeds 5] [--layers 8] [--batches 2]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from libra_des.config import Scenario, load_scenario
from libra_des.results.moe_metrics import simulate_moe
from libra_des.sim.moe.batch import BatchPlanner
from libra_des.workload.routing import RoutingTrace

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "paper-moe-breakdown.yaml"
ACCURACIES = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1)
METRICS = ("gain", "waste", "replica_pairs", "imbalance")


def traces_for(sc: Scenario, seed: int) -> list[RoutingTrace]:
    planner = BatchPlanner.build(sc, sc.parallelism.ep, np.random.default_rng([seed, 99]))
    return [planner.trace(b) for b in range(planner.batches)]


def run(base: list[str], seed: int, traces: list[RoutingTrace], *sets: str) -> dict[str, Any]:
    scenario = load_scenario(SCENARIO, [*base, *sets])
    return simulate_moe(scenario, np.random.default_rng(seed), traces=traces)


def sweep(base: list[str], seeds: int, bias: str) -> dict[float, dict[str, list[float]]]:
    out: dict[float, dict[str, list[float]]] = {a: {m: [] for m in METRICS} for a in ACCURACIES}
    for seed in range(seeds):
        traces = traces_for(load_scenario(SCENARIO, base), seed)
        sglang = run(base, seed, traces, "balancer.policy=sglang")
        for a in ACCURACIES:
            r = run(base, seed, traces, f"balancer.accuracy={a}", f"balancer.error_bias={bias}")
            row = out[a]
            row["gain"].append(r["prefill_tokens_per_s"] / sglang["prefill_tokens_per_s"] - 1)
            row["waste"].append(r["replica_waste_fraction"])
            row["replica_pairs"].append(r["replica_pairs_fraction"])
            row["imbalance"].append(r["imbalance_ratio"]["mean"])
    return out


def cell(values: list[float], pct: bool) -> str:
    v = np.asarray(values) * (100 if pct else 1)
    err = v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else 0.0
    return f"{v.mean():7.2f} ±{err:5.2f}" if pct else f"{v.mean():6.3f} ±{err:5.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--batches", type=int, default=2)
    args = parser.parse_args()
    base = [f"model.layers={args.layers}", f"workload.batches={args.batches}",
            "variance.enabled=false"]
    for bias in ("popular", "random"):
        table = sweep(base, args.seeds, bias)
        print(f"\nerror bias: {bias} ({args.seeds} seeds, {args.layers} layers, "
              f"{args.batches} batches of 32 x 1024 tokens)")
        print(f"{'accuracy':>8} | {'gain vs SGLang %':>16} | {'replica waste %':>15} | "
              f"{'pairs on replicas %':>19} | {'imbalance':>14}")
        for a in ACCURACIES:
            row = table[a]
            print(f"{a:8.1f} | {cell(row['gain'], True):>16} | {cell(row['waste'], True):>15} | "
                  f"{cell(row['replica_pairs'], True):>19} | {cell(row['imbalance'], False):>14}")


if __name__ == "__main__":
    main()
