"""Every shipped MoE system on the shipped MoE scenarios: the before/after table of docs/moe.md.

For each scenario and system (``balancer.policy``, nothing else changed) prints the MoE layer
time, the prefill throughput, the mean imbalance ratio, the predictor it ran with and that
predictor's accuracy, the non-expert share of layer time (when the result reports it), and
the systems' order by throughput. ``--json FILE`` also writes the rows.

    nice .venv/bin/python benchmarks/moe_systems_table.py [--scenarios moe-qwen3-235b ...]
        [--set KEY=VALUE ...] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import libra_des

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = ("paper-moe-breakdown", "moe-qwen3-235b", "moe-glm45")
SYSTEMS = ("sglang", "eplb", "lina", "harmoeny", "libra")


def row(scenario: str, system: str, extra: list[str]) -> dict[str, Any]:
    r = dict(libra_des.simulate(REPO / "scenarios" / f"{scenario}.yaml",
                                [f"balancer.policy={system}", *extra]))
    share = r.get("non_expert_share")
    return {
        "scenario": scenario, "system": system,
        "moe_layer_ms": 1e3 * r["moe_layer_s"],
        "tokens_per_s": r["prefill_tokens_per_s"],
        "imbalance": r["imbalance_ratio"]["mean"],
        "predictor": r.get("predictor"),
        "accuracy": r.get("predictor_accuracy"),
        "non_expert_share": share,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", nargs="*", default=list(SCENARIOS))
    ap.add_argument("--set", dest="extra", action="append", default=[])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows = []
    for sc in args.scenarios:
        got = [row(sc, s, args.extra) for s in SYSTEMS]
        order = " > ".join(r["system"] for r in sorted(got, key=lambda r: -r["tokens_per_s"]))
        print(f"\n{sc}: order by throughput {order}")
        print("| system | MoE layer ms | tokens/s | imbalance | predictor | accuracy | "
              "non-expert share |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for r in got:
            acc = "-" if r["accuracy"] is None else f"{r['accuracy']:.3f}"
            share = "-" if r["non_expert_share"] is None else f"{r['non_expert_share']:.3f}"
            print(f"| {r['system']} | {r['moe_layer_ms']:.3f} | {r['tokens_per_s']:.0f} | "
                  f"{r['imbalance']:.3f} | {r['predictor'] or '-'} | {acc} | {share} |")
        rows += got
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
