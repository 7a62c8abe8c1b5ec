"""Detailed against fast fidelity on the quickstart layout, by scale (not a test).

DP x CP 8 x PP 4 with 8 microbatches per replica (GBS = 8 x DP), pools of min(8, DP), one
step: DP 2 .. 32 gives 64 .. 1,024 GPUs (DP 32 is ``scenarios/quickstart.yaml`` itself).
Prints the CPU seconds of each fidelity (median of ``--repeats``), their ratio, and the
growth exponent of detailed mode between the smallest and largest size (CPU ~ GPUs ** k).

    python benchmarks/detailed.py [--dp 2,4,8,16,32] [--repeats 1]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import numpy as np

from libra_des.config import ROOT, load_scenario
from libra_des.sim.training.simulator import simulate_training


def cpu_seconds(dp: int, fidelity: str) -> tuple[int, float]:
    """(GPUs, CPU seconds) of one step at DP ``dp`` in the given fidelity."""
    sets = [f"parallelism.dp={dp}", f"parallelism.gbs={8 * dp}", f"fidelity={fidelity}",
            f"balancer.pool_size={min(8, dp)}"]
    scenario = load_scenario(ROOT / "scenarios" / "quickstart.yaml", sets)
    began = time.process_time()
    simulate_training(scenario, np.random.default_rng(scenario.seed))
    return scenario.parallelism.gpus, time.process_time() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dp", default="2,4,8,16,32")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    print(f"{'GPUs':>6}{'fast cpu s':>12}{'detailed cpu s':>16}{'ratio':>8}")
    rows = []
    for dp in (int(x) for x in args.dp.split(",")):
        fast = statistics.median(cpu_seconds(dp, "fast")[1] for _ in range(args.repeats))
        runs = [cpu_seconds(dp, "detailed") for _ in range(args.repeats)]
        gpus, detailed = runs[0][0], statistics.median(r[1] for r in runs)
        rows.append((gpus, detailed))
        print(f"{gpus:>6}{fast:>12.2f}{detailed:>16.2f}{detailed / fast:>8.1f}", flush=True)
    if len(rows) > 1:
        (g0, t0), (g1, t1) = rows[0], rows[-1]
        exponent = math.log(t1 / t0) / math.log(g1 / g0)
        print(f"detailed growth exponent {g0} -> {g1} GPUs: {exponent:.2f}")


if __name__ == "__main__":
    main()
