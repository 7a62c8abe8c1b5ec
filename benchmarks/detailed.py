"""Detailed against fast fidelity on the quickstart layout, by scale (not a test).

DP x CP 8 x PP 4 with 8 microbatches per replica (GBS = 8 x DP), pools of min(8, DP), one
step: DP 2 .. 32 gives 64 .. 1,024 GPUs (DP 32 is ``scenarios/quickstart.yaml`` itself).
Prints the CPU seconds of each fidelity (median of ``--repeats``), their ratio, and the
growth exponent of detailed mode between the smallest and largest size (CPU ~ GPUs ** k).
``--check`` also runs detailed mode with every all-to-all solved in the network (no replays,
``sim/network/flow/replay.py``) and prints its CPU seconds and the largest relative difference
of any number in the step records between the two.

    python benchmarks/detailed.py [--dp 2,4,8,16,32] [--repeats 1] [--check]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import time
from functools import partialmethod
from typing import Any
from unittest import mock

import numpy as np

from libra_des.config import ROOT, load_scenario
from libra_des.sim.network.flow.flow_model import Network
from libra_des.sim.training.simulator import simulate_training

#: Step-record fields that time the simulator itself, not the simulated system.
WALL_FIELDS = ("sim_seconds", "plan_seconds", "wall", "events")


def run_step(dp: int, fidelity: str) -> tuple[int, float, Any]:
    """(GPUs, CPU seconds, step records) of one step at DP ``dp`` in the given fidelity."""
    sets = [f"parallelism.dp={dp}", f"parallelism.gbs={8 * dp}", f"fidelity={fidelity}",
            f"balancer.pool_size={min(8, dp)}"]
    scenario = load_scenario(ROOT / "scenarios" / "quickstart.yaml", sets)
    began = time.process_time()
    records = simulate_training(scenario, np.random.default_rng(scenario.seed))
    return scenario.parallelism.gpus, time.process_time() - began, records


def cpu_seconds(dp: int, fidelity: str) -> tuple[int, float]:
    gpus, cpu, _ = run_step(dp, fidelity)
    return gpus, cpu


def numbers(record: Any, prefix: str = "") -> dict[str, float]:
    """Every number in a step record, by its path (simulator timings left out)."""
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        record = {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}
    if isinstance(record, dict):
        items = record.items()
    elif isinstance(record, list | tuple):
        items = enumerate(record)
    elif isinstance(record, int | float | np.number) and not isinstance(record, bool):
        return {} if any(w in prefix for w in WALL_FIELDS) else {prefix: float(record)}
    else:
        return {}
    out: dict[str, float] = {}
    for key, value in items:
        out.update(numbers(value, f"{prefix}.{key}"))
    return out


def largest_difference(a: Any, b: Any) -> float:
    """The largest relative difference between the numbers of two step-record lists."""
    x, y = numbers(a), numbers(b)
    assert x.keys() == y.keys(), "the records differ in shape"
    return max((abs(x[k] - y[k]) / max(abs(x[k]), abs(y[k]), 1e-300) for k in x), default=0.0)


def check(dp: int, records: Any) -> None:
    """Run detailed mode without replays; print its CPU and the largest difference."""
    with mock.patch.object(Network, "__init__", partialmethod(Network.__init__, replay=False)):
        _, cpu, plain = run_step(dp, "detailed")
    print(f"{'':>6}  without replays {cpu:.2f} s CPU; largest relative difference "
          f"{largest_difference(records, plain):.1e}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dp", default="2,4,8,16,32")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--check", action="store_true",
                        help="also run without replays and compare the step records")
    args = parser.parse_args()
    print(f"{'GPUs':>6}{'fast cpu s':>12}{'detailed cpu s':>16}{'ratio':>8}")
    rows = []
    for dp in (int(x) for x in args.dp.split(",")):
        fast = statistics.median(cpu_seconds(dp, "fast")[1] for _ in range(args.repeats))
        runs = [run_step(dp, "detailed") for _ in range(args.repeats)]
        gpus, detailed = runs[0][0], statistics.median(r[1] for r in runs)
        rows.append((gpus, detailed))
        print(f"{gpus:>6}{fast:>12.2f}{detailed:>16.2f}{detailed / fast:>8.1f}", flush=True)
        if args.check:
            check(dp, runs[0][2])
    if len(rows) > 1:
        (g0, t0), (g1, t1) = rows[0], rows[-1]
        exponent = math.log(t1 / t0) / math.log(g1 / g0)
        print(f"detailed growth exponent {g0} -> {g1} GPUs: {exponent:.2f}")


if __name__ == "__main__":
    main()
