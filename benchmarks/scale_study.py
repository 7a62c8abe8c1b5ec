"""How a training step's cost grows with the cluster, fast and detailed fidelity (not a test).

One step of ``scenarios/scale-4096.yaml``'s layout (CP 8 x PP 8, pools of 8 replicas,
16 microbatches per replica) at DP 16, 64 and 256: 1,024, 4,096 and 16,384 GPUs, in fast and
in detailed fidelity. Each run is a fresh interpreter (networkx and simpy imported before the
timer, as in ``scale_vs_base.py``; numba, which the run imports lazily, is inside it).
Printed: CPU seconds (median of ``--repeats``), peak RSS, the simulation's events, CPU
against a bare SimPy loop of 1 M timeouts timed at the start of the run (median of 3,
``x bare``) and against a bare loop timed in a fresh interpreter right before each repeat
(median of the paired ratios, ``x pair``, and of those loops' seconds, ``pair s``); also
numba's import and target set-up alone in a fresh interpreter, a fixed part of each row.
The growth exponent (CPU ~ GPUs ** k) is printed per fidelity between the smallest and the
largest size. ``--ecmp K`` also times detailed mode with ``network.ecmp_samples=K`` against
K = 1 at the smallest size, where the scenario schema has that field (otherwise one line says
it is skipped). ``--figure PATH`` draws CPU seconds against GPUs for both fidelities with the
bare-loop floor (matplotlib, imported only then).

    python benchmarks/scale_study.py [--sizes 1024,4096,16384] [--repeats 1] [--ecmp 8]
        [--figure runs/scale_study.png]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

CHILD = """
import json, resource, sys, time
import networkx, simpy  # imported before the timer, as scale_vs_base.py does
from libra_des.base.startup import tune_process
tune_process()  # as a command runs (libra-des run)
from libra_des.config import ROOT, load_scenario
from libra_des.kinds.simulation import simulate
scenario = load_scenario(ROOT / "scenarios" / "scale-4096.yaml", json.loads(sys.argv[1]))
c0 = time.process_time()
result, _ = simulate(scenario)
cpu = time.process_time() - c0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
events = result.get("events") or result.get("run", {}).get("events")
print(json.dumps({"cpu": cpu, "peak_mib": peak, "events": events}))
"""

#: numba's import and CPU-target set-up in a fresh interpreter, timed as ``CHILD`` times a
#: run (networkx and simpy imported first): a fixed cost inside every row's CPU figure.
STARTUP = """
import json, time
import networkx, simpy
c0 = time.process_time()
from libra_des.base.kernel import kernel_folder
from libra_des.base.startup import numba_target
numba_target(), kernel_folder()
print(json.dumps({"cpu": time.process_time() - c0}))
"""


#: :func:`bare_loop_cpu` in a fresh interpreter, timed right before each run of a row: on a
#: machine whose speed drifts within seconds (the 2-core development VM: the same loop took
#: 0.8 to 1.6 s in one minute), a ratio against a loop timed minutes earlier says more about
#: the drift than about the run.
BARE = """
import json, sys
sys.path.insert(0, "benchmarks")
from scale_study import bare_loop_cpu
print(json.dumps({"cpu": bare_loop_cpu()}))
"""


def bare_loop_cpu(n: int = 1_000_000) -> float:
    """CPU seconds of a bare SimPy loop of ``n`` timeouts (the floor of any SimPy run)."""
    import simpy

    env = simpy.Environment()

    def proc(env: simpy.Environment) -> simpy.events.ProcessGenerator:
        for _ in range(n):
            yield env.timeout(1.0)

    env.process(proc(env))
    began = time.process_time()
    env.run()
    return time.process_time() - began


def sets_for(gpus: int, fidelity: str, extra: list[str]) -> list[str]:
    dp = gpus // 64  # CP 8 x PP 8
    if dp * 64 != gpus or dp < 8:
        raise SystemExit(f"--sizes: got {gpus}; allowed: multiples of 512 GPUs from 512 on")
    return [f"parallelism.dp={dp}", f"parallelism.gbs={16 * dp}", f"fidelity={fidelity}",
            "steps=1", *extra]


def run_once(sets: list[str], code: str = CHILD) -> dict:
    env = dict(os.environ, PYTHONPATH=str(HERE))
    out = subprocess.run([sys.executable, "-c", code, json.dumps(sets)], env=env, cwd=HERE,
                         check=True, capture_output=True, text=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def median_row(sets: list[str], repeats: int) -> dict:
    """Medians over ``repeats`` runs, each paired with a bare loop timed just before it:
    ``paired`` is the median of the runs' ratios to their own bare loop."""
    bare, runs = [], []
    for _ in range(repeats):
        bare.append(run_once([], BARE)["cpu"])
        runs.append(run_once(sets))
    return {"cpu": statistics.median(r["cpu"] for r in runs),
            "peak_mib": max(r["peak_mib"] for r in runs), "events": runs[0]["events"],
            "paired": statistics.median(r["cpu"] / b for r, b in zip(runs, bare, strict=True)),
            "bare": statistics.median(bare)}


def has_ecmp_field() -> bool:
    """Whether the scenario schema knows ``network.ecmp_samples``."""
    from libra_des.config import ROOT, load_scenario

    try:
        load_scenario(ROOT / "scenarios" / "scale-4096.yaml", ["network.ecmp_samples=1"])
    except (Exception, SystemExit):  # unknown field: a validation error of the schema
        return False
    return True


def draw(path: Path, rows: list[tuple[str, int, dict]], floor: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for fidelity in ("fast", "detailed"):
        pts = [(g, r["cpu"]) for f, g, r in rows if f == fidelity]
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="o", label=fidelity)
    ax.axhline(floor, color="grey", linestyle="--", label="bare SimPy loop, 1 M timeouts")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("GPUs")
    ax.set_ylabel("CPU seconds, one step")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150)
    print(f"figure: {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1024,4096,16384")
    parser.add_argument("--fidelities", default="fast,detailed")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--ecmp", type=int, default=0, help="K of the ECMP ensemble (0: off)")
    parser.add_argument("--figure", type=Path, default=None)
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    floor = statistics.median(bare_loop_cpu() for _ in range(3))
    print(f"bare SimPy loop, 1 M timeouts: {floor:.2f} s CPU (median of 3)")
    startup = statistics.median(run_once([], STARTUP)["cpu"] for _ in range(3))
    print(f"numba's import and target set-up in a fresh process: {startup:.2f} s CPU "
          f"(median of 3; inside every row's CPU)")
    print(f"{'fidelity':<10}{'GPUs':>7}{'CPU s':>9}{'x bare':>8}{'x pair':>8}{'pair s':>8}"
          f"{'peak MiB':>10}{'events':>10}")
    rows: list[tuple[str, int, dict]] = []
    for fidelity in args.fidelities.split(","):
        for gpus in sizes:
            row = median_row(sets_for(gpus, fidelity, []), args.repeats)
            rows.append((fidelity, gpus, row))
            print(f"{fidelity:<10}{gpus:>7}{row['cpu']:>9.2f}{row['cpu'] / floor:>8.2f}"
                  f"{row['paired']:>8.2f}{row['bare']:>8.2f}"
                  f"{row['peak_mib']:>10.0f}{row['events'] or 0:>10}", flush=True)
        own = [(g, r["cpu"]) for f, g, r in rows if f == fidelity]
        if len(own) > 1:
            (g0, t0), (g1, t1) = own[0], own[-1]
            print(f"{fidelity} growth exponent {g0} -> {g1} GPUs: "
                  f"{math.log(t1 / t0) / math.log(g1 / g0):.2f}")
    if args.ecmp:
        if not has_ecmp_field():
            print("ECMP cost: skipped (the scenario schema has no network.ecmp_samples)")
        else:
            one = median_row(sets_for(sizes[0], "detailed", ["network.ecmp_samples=1"]),
                             args.repeats)
            many = median_row(
                sets_for(sizes[0], "detailed", [f"network.ecmp_samples={args.ecmp}"]),
                args.repeats)
            print(f"ECMP at {sizes[0]} GPUs: K = {args.ecmp} {many['cpu']:.2f} s CPU, "
                  f"K = 1 {one['cpu']:.2f} s: {many['cpu'] / one['cpu']:.2f}x")
    if args.figure is not None:
        draw(args.figure, rows, floor)


if __name__ == "__main__":
    main()
