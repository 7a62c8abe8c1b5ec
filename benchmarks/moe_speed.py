"""MoE prefill speed benchmark: wall seconds of ``simulate_moe`` per scenario (not a test).

Prints, per case, the SimPy events, the median wall seconds over ``--repeats`` runs, and the
same time expressed in bare-SimPy events: ``wall * rate``, where ``rate`` is the event rate of
a bare SimPy timeout loop timed in the same run (absolute seconds mean little on shared
machines; the ratio travels between them). Also prints the ratio of the simulator's own event
rate to the bare loop's, and the median CPU seconds (its helper processes included)
against the CPU of a bare loop of 1 M timeouts (``x bare 1M``, median of 3, as
``scale_study.py`` times it) and the median of each run's CPU over a bare loop timed just
before it (``x pair``).

    python benchmarks/moe_speed.py [--repeats 3] [--cases paper-moe-breakdown:libra,...]

A case is ``scenario`` or ``scenario:policy`` (``balancer.policy`` override).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import numpy as np
from scale import bare_simpy_rate  # benchmarks/scale.py (run as a script from benchmarks/)
from scale_study import bare_loop_cpu

from libra_des.config import ROOT, load_scenario
from libra_des.results.moe_metrics import simulate_moe

DEFAULT_CASES = "paper-moe-breakdown:libra,paper-moe-breakdown:sglang,moe-qwen3-235b"


def one_run(case: str) -> tuple[int, float, float]:
    """(SimPy events, wall seconds, CPU seconds) of one run of a ``scenario[:policy]`` case."""
    name, _, policy = case.partition(":")
    overrides = [f"balancer.policy={policy}"] if policy else []
    scenario = load_scenario(ROOT / "scenarios" / f"{name}.yaml", overrides)
    t0, c0 = time.perf_counter(), cpu_now()
    result = simulate_moe(scenario, np.random.default_rng(scenario.seed))
    return int(result["events"]), time.perf_counter() - t0, cpu_now() - c0


def cpu_now() -> float:
    """CPU seconds of this process plus its finished children (the routing prefetch helper
    process, ``sim/moe/prefetch.py``, does part of a run's work)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cases", default=DEFAULT_CASES)
    args = parser.parse_args()
    base = statistics.median(bare_simpy_rate() for _ in range(3))
    floor = statistics.median(bare_loop_cpu() for _ in range(3))
    print(f"bare SimPy timeout loop: {base:,.0f} events/s (median of 3); "
          f"1 M timeouts: {floor:.2f} s CPU (median of 3)")
    print(f"{'case':<30}{'events':>9}{'wall s':>9}{'bare-equiv ev':>15}{'rate/bare':>11}"
          f"{'CPU s':>8}{'x bare 1M':>11}{'x pair':>8}")
    total = 0.0
    for case in args.cases.split(","):
        # Each run paired with a bare loop timed just before it, in this process (the
        # machine's speed drifts: scale_study.BARE).
        pairs = [(bare_loop_cpu(), one_run(case)) for _ in range(args.repeats)]
        runs = [r for _, r in pairs]
        events = runs[0][0]
        wall = statistics.median(r[1] for r in runs)
        cpu = statistics.median(r[2] for r in runs)
        paired = statistics.median(r[2] / b for b, r in pairs)
        total += wall
        print(f"{case:<30}{events:>9}{wall:>9.2f}{wall * base:>15,.0f}"
              f"{events / wall / base:>11.4f}{cpu:>8.2f}{cpu / floor:>11.2f}{paired:>8.2f}")
    print(f"{'total (sum of medians)':<30}{'':>9}{total:>9.2f}{total * base:>15,.0f}")
    print("'bare-equiv ev': the wall time as events of the bare loop (lower is faster);")
    print("'rate/bare': the simulator's event rate over the bare loop's (higher is faster).")


if __name__ == "__main__":
    main()
