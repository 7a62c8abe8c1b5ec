"""Flow-network benchmark: collectives on the max-min fair network (not a test).

All-to-all(v) cases: every GPU pair sends a different number of bytes, so nearly every flow
ends at its own instant and forces its own rate recomputation: the worst case for the
detailed fidelity mode. GPUs 0..63 and 0..31 of h200-roce-railopt with 8 nodes, and one
h200-8x-nvswitch node; sizes uniform in [0.5, 1.5] MiB or lognormal(0, 1) MiB (skewed).
``rail64-ring``: a 64 MiB ring all-reduce over GPUs 0..63, a DAG of 64,512 single
transfers (the per-message path every DAG collective takes).

Prints the median wall seconds of ``--repeats`` runs, the SimPy events, rate
recomputations and progressive-filling fallbacks of a run, and how many times slower than
a bare SimPy timeout loop (timed in the same run) the network is per event: absolute
times mean little on shared machines, the ratio travels.

    python benchmarks/network.py [--repeats 3] [--cases rail64-skewed,...] [--module PATH]
        [--compare PATH]

``--module`` times another implementation of ``libra_des/sim/network/flow/flow_model.py`` (a file
with
the same ``Network`` class), e.g. an older revision, against the same cases. ``--compare``
runs every case's flows as separate transfers in this checkout and in another implementation
and prints the largest relative difference of any flow's finish time.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import simpy
from scale import bare_simpy_rate  # benchmarks/scale.py (run as a script from benchmarks/)

from libra_des.hardware.fabric.topology import Topology, load_topology
from libra_des.sim.network.flow import flow_model as network

MIB = float(1 << 20)
CASES = {
    # name: (topology, topology params, GPUs, skewed sizes; None: a ring all-reduce)
    "rail64-uniform": ("h200-roce-railopt", {"nodes": 8}, 64, False),
    "rail64-skewed": ("h200-roce-railopt", {"nodes": 8}, 64, True),
    "rail32-uniform": ("h200-roce-railopt", {"nodes": 8}, 32, False),
    "rail32-skewed": ("h200-roce-railopt", {"nodes": 8}, 32, True),
    "nvswitch8-uniform": ("h200-8x-nvswitch", {}, 8, False),
    "nvswitch8-skewed": ("h200-8x-nvswitch", {}, 8, True),
    "rail64-ring": ("h200-roce-railopt", {"nodes": 8}, 64, None),
}
#: The ring case's all-reduce size.
RING_BYTES = 64 * MIB


class CountingEnvironment(simpy.Environment):
    """A SimPy environment that counts the events it processes."""

    events = 0

    def step(self) -> None:
        self.events += 1
        super().step()


def send_matrix(n: int, skewed: bool, rng: np.random.Generator) -> np.ndarray:
    """Bytes from rank i to rank j: every pair different."""
    unit = rng.lognormal(0.0, 1.0, (n, n)) if skewed else rng.uniform(0.5, 1.5, (n, n))
    return unit * MIB


def one_run(module: ModuleType, topo: Topology, gpus: list[int], matrix: np.ndarray | None
            ) -> dict:
    """One all-to-all(v) of ``matrix``, or (None) the ring case's all-reduce."""
    env = CountingEnvironment()
    net = module.Network(env, topo)
    t0 = time.perf_counter()
    if matrix is None:
        env.run(net.collective("all_reduce", gpus, RING_BYTES, algorithm="ring"))
    else:
        env.run(net.collective("all_to_all", gpus, send_bytes=matrix))
    wall = time.perf_counter() - t0
    return {
        "wall": wall,
        "events": env.events,
        "recomputations": net.recomputations,
        "fallbacks": getattr(net, "fallbacks", -1),
        "flows": getattr(net, "flows_done", -1),
        "sim_s": env.now,
    }


def finish_times(
    module: ModuleType, topo: Topology, gpus: list[int], matrix: np.ndarray
) -> np.ndarray:
    """Each flow's finish time when the all-to-all's flows run as separate transfers."""
    env = simpy.Environment()
    net = module.Network(env, topo)
    pairs = [(i, j) for i in gpus for j in gpus if i != j]
    end = np.full(len(pairs), np.nan)

    def mark(k: int) -> Callable[[simpy.Event], None]:
        return lambda _e: end.__setitem__(k, env.now)

    for k, (i, j) in enumerate(pairs):
        net.transfer(i, j, float(matrix[i, j])).callbacks.append(mark(k))
    env.run()
    return end


def load_module(path: str | None) -> ModuleType:
    if path is None:
        return network
    spec = importlib.util.spec_from_file_location("network_under_test", Path(path))
    if spec is None or spec.loader is None:
        sys.exit(f"error: --module: cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while defining
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--module", default=None, help="another network.py to time")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compare", default=None, help="another network.py to compare with")
    args = parser.parse_args()
    if args.compare:
        compare(load_module(args.compare), args)
        return
    module = load_module(args.module)
    base = statistics.median(bare_simpy_rate() for _ in range(3))
    print(f"network module: {module.__file__}")
    print(f"bare SimPy timeout loop: {base:,.0f} events/s (median of 3)")
    print(
        f"{'case':<19}{'flows':>7}{'events':>8}{'recomp':>8}{'fallbk':>8}"
        f"{'wall s':>9}{'x bare':>9}{'sim ms':>9}"
    )
    for name in args.cases.split(","):
        if name not in CASES:
            sys.exit(f"error: --cases: got {name!r}; allowed: {', '.join(CASES)}")
        topo_name, params, n, skewed = CASES[name]
        topo = load_topology(topo_name, params)
        gpus = list(range(n))
        matrix = None if skewed is None else send_matrix(n, skewed,
                                                          np.random.default_rng(args.seed))
        runs = [one_run(module, topo, gpus, matrix) for _ in range(args.repeats)]
        wall = statistics.median(r["wall"] for r in runs)
        first = runs[0]
        slowdown = base * wall / first["events"]  # network seconds per event / bare ones
        print(
            f"{name:<19}{first['flows']:>7}{first['events']:>8}{first['recomputations']:>8}"
            f"{first['fallbacks']:>8}{wall:>9.3f}{slowdown:>9.0f}{1e3 * first['sim_s']:>9.4f}"
        )
    print("'x bare': wall seconds per SimPy event over those of the bare timeout loop;")
    print("'fallbk': recomputations that needed full progressive filling (-1: not counted).")


def compare(other: ModuleType, args: argparse.Namespace) -> None:
    """Largest relative difference of per-flow finish times, this checkout vs ``other``."""
    print(f"per-flow finish times: {network.__file__} against {other.__file__}")
    for name in args.cases.split(","):
        topo_name, params, n, skewed = CASES[name]
        if skewed is None:
            print(f"{name:<19} skipped: not an all-to-all")
            continue
        topo = load_topology(topo_name, params)
        matrix = send_matrix(n, skewed, np.random.default_rng(args.seed))
        ours = finish_times(network, topo, list(range(n)), matrix)
        theirs = finish_times(other, topo, list(range(n)), matrix)
        worst = float(np.max(np.abs(ours - theirs) / theirs))
        print(f"{name:<19} flows {ours.size:>5}  max relative difference {worst:.2e}")


if __name__ == "__main__":
    main()
