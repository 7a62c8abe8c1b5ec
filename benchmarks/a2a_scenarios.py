"""What each all-to-all mechanism changes in the paper scenarios (docs/communication.md).

    python benchmarks/a2a_scenarios.py [--base /path/to/main/worktree] [--scenarios a b ...]
        [--set key=value ...]

Runs each scenario at full size, one step, fast mode (``libra-des run S --set steps=1``):
with every mechanism on, then with each of ``hardware/collectives/alltoall.py``'s mechanisms off in
turn
(in-process: the cost model's ``Mechanisms`` default replaced), and, with ``--base``, the same
command in another worktree (its own ``.venv``) as the baseline. Prints one markdown row per
(scenario, variant): step time, exposed and hidden attention exchange.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import libra_des
from libra_des.hardware.collectives import communication
from libra_des.hardware.collectives.alltoall import Mechanisms

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = (
    "paper-pool-sweep-256k", "paper-pool-sweep-1m", "paper-attention-microbench-256k",
    "paper-attention-microbench-1m", "paper-dp-scaling-256k", "paper-dp-scaling-1m",
)
OFF = ("size_efficiency", "per_peer", "pxn", "incast")


def figures(result: dict[str, Any]) -> tuple[float, float, float]:
    return (float(result["step_time_s"]["mean"]), float(result["attention_comm_exposed_s"]),
            float(result["attention_comm_hidden_s"]))


def here(scenario: str, off: str | None, sets: tuple[str, ...] = ()) -> tuple[float, float, float]:
    """One step in this tree, ``off`` switched off (None: all on)."""
    default = communication.Mechanisms
    if off is not None:
        communication.Mechanisms = lambda: dataclasses.replace(  # type: ignore[misc]
            Mechanisms(), **{off: False})
    try:
        result = libra_des.simulate(ROOT / "scenarios" / f"{scenario}.yaml", ["steps=1", *sets])
    finally:
        communication.Mechanisms = default  # type: ignore[misc]
    return figures(dict(result.data))


def base(tree: Path, scenario: str, sets: tuple[str, ...] = ()) -> tuple[float, float, float]:
    """The same command in another worktree (its own virtual environment)."""
    extra = [a for kv in sets for a in ("--set", kv)]
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([str(tree / ".venv" / "bin" / "libra-des"), "run",
                        f"scenarios/{scenario}.yaml", "--set", "steps=1", *extra, "--out", out],
                       cwd=tree, check=True, capture_output=True)
        return figures(json.loads((Path(out) / "result.json").read_text()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", type=Path, default=None)
    ap.add_argument("--scenarios", nargs="*", default=list(SCENARIOS))
    ap.add_argument("--set", dest="sets", action="append", default=[],
                    help="extra scenario override for every run (key=value)")
    args = ap.parse_args()
    sets = tuple(args.sets)
    print("| scenario | variant | step s | attention exposed s | attention hidden s |")
    print("| --- | --- | --- | --- | --- |")
    for sc in args.scenarios:
        rows = [("base", base(args.base, sc, sets))] if args.base else []
        rows.append(("all on", here(sc, None, sets)))
        rows += [(f"{name} off", here(sc, name, sets)) for name in OFF]
        for name, (step, exposed, hidden) in rows:
            print(f"| {sc} | {name} | {step:.3f} | {exposed:.3f} | {hidden:.3f} |", flush=True)


if __name__ == "__main__":
    main()
