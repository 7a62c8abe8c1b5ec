"""Per-operation cost of the MoE systems' CPU planning, measured with compiled (numba) code.

The simulator prices each CPU stage as its algorithm's operation count (``sim/moe/cpu.py``)
times a cost per operation in CPU cycles, run on a stated server CPU. This script measures
that cost in cycles: it runs compiled implementations of the three planning loops on
Zipf-skewed ``[G, E]`` pair counts, counts their operations with the same formulas as
``sim/moe/cpu.py``, and divides the wall time (median of repeats, one core) by the count and
by this host's clock. Prints ns and cycles per operation per loop and overall.

    nice .venv/bin/python benchmarks/moe_cpu_ops.py [--repeats 200]
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numba
import numpy as np

from libra_des.sim.moe.cpu import lookup_ops, replication_ops, sharding_ops


@numba.njit(cache=False)
def greedy_moves(counts: np.ndarray, holders: np.ndarray, tol: float) -> int:
    """The sharding loop: move the most-loaded GPU's largest expert share to the least-loaded
    GPU holding that expert, until balanced; returns the moves made."""
    g, e = counts.shape
    load = np.zeros(g)
    for i in range(g):
        for j in range(e):
            load[i] += counts[i, j]
    target = load.sum() / g * (1.0 + tol)
    moves = 0
    for _ in range(4 * g * e):
        hot = 0
        for i in range(g):
            if load[i] > load[hot]:
                hot = i
        if load[hot] <= target:
            break
        best, share = -1, 0.0
        for j in range(e):
            if counts[hot, j] > share:
                best, share = j, counts[hot, j]
        cold = -1
        for i in range(g):
            if holders[i, best] and i != hot and (cold < 0 or load[i] < load[cold]):
                cold = i
        moves += 1
        if cold < 0:
            counts[hot, best] = 0.0  # no holder: this expert cannot move
            continue
        amount = min(share, (load[hot] - load[cold]) / 2)
        if amount <= 0:
            break
        counts[hot, best] -= amount
        counts[cold, best] += amount
        load[hot] -= amount
        load[cold] += amount
    return moves


@numba.njit(cache=False)
def place_replicas(load: np.ndarray, expert: np.ndarray, slots: int) -> int:
    """The replication loop: take the hottest expert of the most-loaded GPU and replicate it
    to the least-loaded GPU with a free slot, ``slots`` times per GPU."""
    g, e = expert.shape
    free = np.full(g, slots)
    placed = 0
    for _ in range(g * slots):
        hot = 0
        for i in range(g):
            if load[i] > load[hot]:
                hot = i
        best = 0
        for j in range(e):
            if expert[hot, j] > expert[hot, best]:
                best = j
        cold = -1
        for i in range(g):
            if free[i] > 0 and i != hot and (cold < 0 or load[i] < load[cold]):
                cold = i
        if cold < 0:
            break
        half = expert[hot, best] / 2
        expert[hot, best] -= half
        expert[cold, best] += half
        load[hot] -= half
        load[cold] += half
        free[cold] -= 1
        placed += 1
    return placed


@numba.njit(cache=False)
def path_lookup(table: np.ndarray, prev: np.ndarray, top_k: int) -> np.ndarray:
    """Lina's lookup of one layer's expert loads: the histogram of the tokens' previous-layer
    experts, times the layer's ``[E, E]`` path table."""
    t, k = prev.shape
    e = table.shape[0]
    hist = np.zeros(e)
    for n in range(t):
        for a in range(k):
            hist[prev[n, a]] += 1.0
    out = np.zeros(e)
    for i in range(e):
        h = hist[i]
        for j in range(e):
            out[j] += h * table[i, j]
    return out


def shard_copy(counts: np.ndarray, holders: np.ndarray) -> int:
    return int(greedy_moves(counts.copy(), holders, 0.01))


def replicate_copy(counts: np.ndarray) -> int:
    return int(place_replicas(counts.sum(axis=1), counts.copy(), 8))


def host_ghz() -> float:
    """This host's clock from /proc/cpuinfo (the first core's current MHz)."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("cpu MHz"):
            return float(line.split(":")[1]) / 1e3
    return float("nan")


def host_cpu() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":")[1].strip()
    return platform.processor()


def median_s(fn: Callable[[], object], repeats: int) -> float:
    fn()  # compile
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=200)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    ghz = host_ghz()
    print(f"host: {host_cpu()}, {ghz:.2f} GHz, one core (numba {numba.__version__})")
    print(f"{'loop':>11} | {'G':>3} | {'ops':>9} | {'ns/op':>6} | cycles/op")
    per_op = []
    for g in (8, 16, 32):
        e = 128
        weights = 1.0 / np.arange(1, e + 1)
        counts = rng.multinomial(g * 4096, weights / weights.sum(), size=g).astype(np.float64)
        holders = np.zeros((g, e), dtype=np.bool_)
        holders[np.arange(e) % g, np.arange(e)] = True
        holders[rng.random((g, e)) < 8 / e] = True
        moves = greedy_moves(counts.copy(), holders, 0.01)
        cases: list[tuple[str, Callable[[], object], float]] = [
            ("sharding", partial(shard_copy, counts, holders), sharding_ops(g, e, moves)),
            ("replication", partial(replicate_copy, counts), replication_ops(g, e, 8 * g)),
        ]
        tokens = 4096 * g
        table = rng.random((e, e))
        prev = rng.integers(0, e, size=(tokens, 8))
        cases.append(("lookup", partial(path_lookup, table, prev, 8),
                      lookup_ops(tokens, e, 8)))
        for name, fn, ops in cases:
            ns = median_s(fn, args.repeats) / ops * 1e9
            per_op.append(ns * ghz)
            print(f"{name:>11} | {g:>3} | {ops:>9.0f} | {ns:6.3f} | {ns * ghz:.2f}")
    print(f"median over the cases: {np.median(per_op):.2f} cycles per operation")


if __name__ == "__main__":
    main()
