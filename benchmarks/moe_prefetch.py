"""MoE run with its generated batches drawn ahead by a thread or a helper process, against
drawing them in the run itself (``simulate_moe(prefetch=...)``), each in a fresh
interpreter, alternating (not a test).

Prints median wall seconds, the run's own CPU seconds (all its threads) and the helper
process's, the one-minute load average, and whether the results are identical. On an idle
machine the wall time approaches the larger of the two halves' CPU; on a loaded one it
cannot (see benchmarks/README.md, "Notes on MoE routing traces").

    python benchmarks/moe_prefetch.py [--scenario moe-qwen3-235b] [--repeats 3]
        [--modes off,thread,process]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = """
import json, os, resource, sys, time
import numpy as np
from libra_des.config import ROOT, load_scenario
from libra_des.results.moe_metrics import simulate_moe
from libra_des.sim.moe.simulator import WALL_CLOCK_FIELDS

def helper_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime

sc = load_scenario(ROOT / "scenarios" / f"{sys.argv[1]}.yaml")
w0, c0, h0 = time.perf_counter(), time.process_time(), helper_cpu()
mode = {"off": False, "thread": "thread", "process": "process"}[sys.argv[2]]
result = simulate_moe(sc, np.random.default_rng(sc.seed), prefetch=mode)
row = {"wall": time.perf_counter() - w0, "cpu": time.process_time() - c0,
       "helper": helper_cpu() - h0, "load": os.getloadavg()[0]}
for key in WALL_CLOCK_FIELDS:
    result.pop(key, None)
row["result"] = json.dumps(result, sort_keys=True, default=str)
print(json.dumps(row))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="moe-qwen3-235b")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--modes", default="off,thread,process")
    args = parser.parse_args()
    rows: dict[str, list[dict]] = {mode: [] for mode in args.modes.split(",")}
    for _ in range(args.repeats):
        for mode in rows:
            out = subprocess.run([sys.executable, "-c", CHILD, args.scenario, mode], check=True,
                                 capture_output=True, text=True)
            rows[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"{'prefetch':<10}{'wall s':>9}{'run cpu s':>11}{'helper cpu s':>14}{'load':>7}")
    for mode, runs in rows.items():
        med = {k: statistics.median(r[k] for r in runs)
               for k in ("wall", "cpu", "helper", "load")}
        print(f"{mode:<10}{med['wall']:>9.2f}{med['cpu']:>11.2f}{med['helper']:>14.2f}"
              f"{med['load']:>7.2f}")
    same = len({r["result"] for runs in rows.values() for r in runs}) == 1
    print(f"identical results: {same}")


if __name__ == "__main__":
    main()
