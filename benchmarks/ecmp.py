"""What an ECMP ensemble costs and how close its light replays come (not a test).

Quickstart layout in detailed mode (DP x CP 8 x PP 4, 8 microbatches per replica, pools of
min(8, DP)), one step. ``--dp`` (default 32: 1,024 GPUs, the quickstart itself) times the
step with ``network.ecmp_samples`` 1 and K (``--ecmp``, default 8) in the same run, medians
of ``--repeats``, and prints their ratio. ``--check DP`` (default 4: 128 GPUs) also runs K
full simulations, one per hash (the run's route set replaced by each sample's), and prints
each light replay's step time and exposed communication beside the full one, with the
largest relative errors; ``--set`` adds scenario overrides to both (for example
``topology_params.levels.1.oversubscription=4``, where the spine binds).

    python benchmarks/ecmp.py [--dp 32] [--ecmp 8] [--repeats 1] [--check 4] [--set k=v]...
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any
from unittest import mock

import numpy as np

from libra_des.config import ROOT, load_scenario
from libra_des.hardware.fabric.routing import Routing
from libra_des.results.metrics import step_metrics
from libra_des.sim.training import simulator
from libra_des.sim.training.simulator import simulate_training


def scenario(dp: int, samples: int, sets: list[str]) -> Any:
    over = [f"parallelism.dp={dp}", f"parallelism.gbs={8 * dp}", "fidelity=detailed",
            f"balancer.pool_size={min(8, dp)}", f"network.ecmp_samples={samples}", *sets]
    return load_scenario(ROOT / "scenarios" / "quickstart.yaml", over)


def timed(dp: int, samples: int, sets: list[str]) -> tuple[float, Any]:
    """CPU seconds of one step and its record."""
    sc = scenario(dp, samples, sets)
    began = time.process_time()
    (rec,) = simulate_training(sc, np.random.default_rng(sc.seed))
    return time.process_time() - began, rec


def cost(dp: int, k: int, repeats: int, sets: list[str]) -> None:
    one = statistics.median(timed(dp, 1, sets)[0] for _ in range(repeats))
    many = statistics.median(timed(dp, k, sets)[0] for _ in range(repeats))
    gpus = scenario(dp, 1, sets).parallelism.gpus
    print(f"{gpus} GPUs: K=1 {one:.2f} s CPU, K={k} {many:.2f} s CPU, ratio {many / one:.2f}",
          flush=True)


def check(dp: int, k: int, sets: list[str]) -> None:
    """Light replays against full simulations of the same hashes."""
    sc = scenario(dp, k, sets)
    _, rec = timed(dp, k, sets)
    light = [rec, *rec.ecmp]
    print(f"{'sample':>6}{'light step s':>14}{'full step s':>13}{'light exp':>11}"
          f"{'full exp':>10}")
    worst_step = worst_exp = 0.0
    for s in range(k):
        only = (Routing.sample(sc.network.routing, sc.network.ecmp_seed, s),)
        with mock.patch.object(simulator, "ecmp_routings", lambda _sc, only=only: only):
            _, full = timed(dp, 1, sets)
        a, b = step_metrics(sc, light[s]), step_metrics(sc, full)
        worst_step = max(worst_step, abs(a["step_time"] / b["step_time"] - 1))
        worst_exp = max(worst_exp, abs(a["comm_exposed"] / b["comm_exposed"] - 1))
        print(f"{s:>6}{a['step_time']:>14.4f}{b['step_time']:>13.4f}"
              f"{a['comm_exposed']:>11.5f}{b['comm_exposed']:>10.5f}", flush=True)
    spread = [step_metrics(sc, r)["step_time"] for r in light]
    print(f"largest error: step time {worst_step:.2e}, exposed comm {worst_exp:.2e}; "
          f"light spread of step time {max(spread) - min(spread):.4g} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dp", type=int, default=32)
    parser.add_argument("--ecmp", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--check", type=int, default=None, metavar="DP")
    parser.add_argument("--set", action="append", default=[], dest="sets")
    args = parser.parse_args()
    if args.check is not None:
        check(args.check, args.ecmp, args.sets)
    else:
        cost(args.dp, args.ecmp, args.repeats, args.sets)


if __name__ == "__main__":
    main()
