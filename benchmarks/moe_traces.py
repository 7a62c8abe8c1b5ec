"""Routing-trace generation speed: the compiled kernels against numpy, one batch (not a test).

Draws one batch of a scenario's generated routing with ``generate_trace(..., compiled=True)``
(numba PCG64 uniforms and one-pass sort keys) and with ``compiled=False`` (plain numpy),
alternately from the same seed, and prints median CPU seconds of each, their ratio, and
whether the traces are identical. The first compiled call also pays numba's import and cache
load; it is reported apart and left out of the medians.

    python benchmarks/moe_traces.py [--scenario moe-qwen3-235b] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from libra_des.config import ROOT, RoutingSpec, load_scenario
from libra_des.sim.moe.setup import batch_lengths
from libra_des.workload.routing import RouterModel, generate_trace, request_datasets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="moe-qwen3-235b")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    sc = load_scenario(ROOT / "scenarios" / f"{args.scenario}.yaml")
    m, w = sc.model, sc.workload
    spec = w.routing or RoutingSpec()
    router = RouterModel.build(m.name, m.experts, m.layers - m.dense_layers, m.top_k, spec)
    lengths = batch_lengths(w.seq_len, w.batch)
    datasets = request_datasets(spec.dataset, w.batch, 0, w.batch, np.random.default_rng(0))

    def once(compiled: bool) -> tuple[float, np.ndarray]:
        c0 = time.process_time()
        trace = generate_trace(router, lengths, datasets, np.random.default_rng(sc.seed),
                               compiled)
        return time.process_time() - c0, trace.experts

    first, _ = once(True)
    times: dict[bool, list[float]] = {True: [], False: []}
    same = True
    for _ in range(args.repeats):
        (a, ea), (b, eb) = once(True), once(False)
        times[True].append(a)
        times[False].append(b)
        same = same and bool(np.array_equal(ea, eb))
    new, old = statistics.median(times[True]), statistics.median(times[False])
    uniforms = int(lengths.sum()) * router.gate.shape[0] * m.experts
    print(f"{args.scenario}: one batch, {uniforms / 1e6:.0f}M uniforms")
    print(f"compiled {new:.3f} s CPU, numpy {old:.3f} s (ratio {new / old:.3f}); "
          f"first compiled call {first:.3f} s; identical: {same}")


if __name__ == "__main__":
    main()
