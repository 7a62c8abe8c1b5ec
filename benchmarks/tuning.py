"""What process tuning buys an API user (not a test): one simulation's CPU seconds in a fresh
interpreter, untuned (what ``libra_des.simulate`` gets in any host) and after
``libra_des.tune_process()`` (what ``libra-des run`` gets), alternating, with medians.

Usage: ``python benchmarks/tuning.py [--repeats 4] [--case 131k-fast|4096-detailed|quickstart]``.
Kernels must be compiled already (run any case once first): the first run of a fresh cache
folder pays the compile inside its simulation.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
#: Scenario and overrides of each case (131k-fast: scale_study.py's 131,072-GPU fast step).
CASES = {
    "131k-fast": ("scale-4096.yaml", {"parallelism.dp": 2048, "parallelism.gbs": 32768,
                                      "fidelity": "fast", "steps": 1}),
    "4096-detailed": ("scale-4096.yaml", {"fidelity": "detailed"}),
    "quickstart": ("quickstart.yaml", {}),
}
CHILD = """
import json, resource, sys, time
import libra_des
if sys.argv[1] == "tuned":
    libra_des.tune_process()
sc = libra_des.load_scenario(sys.argv[2], json.loads(sys.argv[3]))
c0 = time.process_time()
res = libra_des.simulate(sc)
print(json.dumps({"cpu": time.process_time() - c0,
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "tokens_per_s": res["tokens_per_s"]}))
"""


def run_once(mode: str, case: str) -> dict[str, float]:
    name, sets = CASES[case]
    env = dict(os.environ, PYTHONPATH=str(HERE))
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(HERE / "scenarios" / name),
                          json.dumps(sets)], env=env, cwd=HERE, check=True,
                         capture_output=True, text=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--case", choices=sorted(CASES), default="131k-fast")
    args = parser.parse_args()
    rows: dict[str, list[dict[str, float]]] = {"plain": [], "tuned": []}
    for _ in range(args.repeats):
        for mode in rows:
            rows[mode].append(run_once(mode, args.case))
    for mode, runs in rows.items():
        cpu = [r["cpu"] for r in runs]
        print(f"{mode}: CPU median {statistics.median(cpu):.2f} s "
              f"({', '.join(f'{c:.2f}' for c in cpu)}), peak "
              f"{statistics.median(r['peak_mib'] for r in runs):.0f} MiB")
    same = {r["tokens_per_s"] for runs in rows.values() for r in runs}
    print("results identical" if len(same) == 1 else f"results DIFFER: {sorted(same)}")


if __name__ == "__main__":
    main()
