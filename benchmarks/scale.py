"""Scale benchmark: one training step of scale-4096 and scale-16384 (not a test).

Prints GPUs, events, wall seconds, events per second, and the ratio of the simulator's event
rate to a bare SimPy timeout loop timed in the same run (absolute times mean little on shared
machines; the ratio travels). Also prints wall seconds per GPU to show the growth with scale.

    python benchmarks/scale.py [--repeats 3] [--scenarios scale-4096,scale-16384]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import simpy

from libra_des.config import ROOT, load_scenario
from libra_des.sim.training.simulator import simulate_training


def bare_simpy_rate(n: int = 200_000) -> float:
    """Events per second of a bare SimPy loop of ``n`` timeouts."""
    env = simpy.Environment()

    def proc(env: simpy.Environment) -> simpy.events.ProcessGenerator:
        for _ in range(n):
            yield env.timeout(1.0)

    env.process(proc(env))
    t0 = time.perf_counter()
    env.run()
    return n / (time.perf_counter() - t0)


def one_step(name: str) -> tuple[int, int, float, float, float]:
    """(GPUs, events, wall s total, s planning, s inside SimPy) of one step of a scenario."""
    scenario = load_scenario(ROOT / "scenarios" / f"{name}.yaml")
    t0 = time.perf_counter()
    records = simulate_training(scenario, np.random.default_rng(scenario.seed))
    wall = time.perf_counter() - t0
    rec = records[0]
    return scenario.parallelism.gpus, rec.run.events, wall, rec.plan.plan_seconds, rec.sim_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scenarios", default="scale-4096,scale-16384")
    args = parser.parse_args()
    base = statistics.median(bare_simpy_rate() for _ in range(3))
    print(f"bare SimPy timeout loop: {base:,.0f} events/s (median of 3)")
    header = f"{'scenario':<14}{'GPUs':>7}{'events':>9}{'wall s':>9}{'plan s':>8}{'simpy s':>9}"
    print(header + f"{'events/s':>11}{'vs bare':>9}{'simpy/bare':>11}{'ms/GPU':>8}")
    for name in args.scenarios.split(","):
        runs = [one_step(name) for _ in range(args.repeats)]
        gpus, events = runs[0][0], runs[0][1]
        wall = statistics.median(r[2] for r in runs)
        plan = statistics.median(r[3] for r in runs)
        simpy_s = statistics.median(r[4] for r in runs)
        rate = events / wall
        print(
            f"{name:<14}{gpus:>7}{events:>9}{wall:>9.2f}{plan:>8.2f}{simpy_s:>9.3f}"
            f"{rate:>11,.0f}{rate / base:>9.3f}{events / simpy_s / base:>11.3f}"
            f"{1e3 * wall / gpus:>8.2f}"
        )
    print("events/s and 'vs bare' count the whole step (planning and numpy costing included);")
    print("'simpy/bare' is the event rate inside the pipeline's run against the bare timeout")
    print("loop: at fast fidelity its events are the recurrence's ops, not SimPy events.")


if __name__ == "__main__":
    main()
