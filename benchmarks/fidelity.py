"""Fast versus detailed fidelity on the shipped scenarios small enough for the flow network.

Prints, per scenario (one step, its own settings), the step time and the attention figures
(straggler mean, exposed and hidden exchange per GPU) of both modes and their ratio. The
differences are explained scenario by scenario in docs/communication.md. Not a test.

    python benchmarks/fidelity.py [--scenarios a,b] [--set key=value ...]
"""

from __future__ import annotations

import argparse

from libra_des.commands.run import simulate
from libra_des.config import ROOT, load_scenario

SMALL = (
    "paper-attention-microbench-256k",
    "paper-dp-scaling-256k",
    "paper-attention-microbench-1m",
    "paper-dp-scaling-1m",
    "paper-pp-microbatch-256k",
)
KEYS = ("step", "straggler", "exposed", "hidden")


def figures(name: str, fidelity: str, extra: list[str]) -> dict[str, float]:
    scenario = load_scenario(
        ROOT / "scenarios" / f"{name}.yaml", ["steps=1", f"fidelity={fidelity}", *extra]
    )
    res, _ = simulate(scenario)
    return {
        "step": res["step_time_s"]["mean"],
        "straggler": res["attention_straggler_s"]["mean"],
        "exposed": res["attention_comm_exposed_s"],
        "hidden": res["attention_comm_hidden_s"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default=",".join(SMALL))
    parser.add_argument("--set", action="append", default=[])
    args = parser.parse_args()
    print(f"{'scenario':<34}" + "".join(f"{k + ' f/d':>22}" for k in KEYS) + f"{'step d/f':>10}")
    for name in args.scenarios.split(","):
        fast, det = figures(name, "fast", args.set), figures(name, "detailed", args.set)
        cells = "".join(f"{fast[k]:>11.4g}{det[k]:>11.4g}" for k in KEYS)
        print(f"{name:<34}{cells}{det['step'] / fast['step']:>10.4f}", flush=True)


if __name__ == "__main__":
    main()
