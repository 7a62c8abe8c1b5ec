"""Does the pool-size sweep's communication level off because of the bytes TAP moves, or the
rate it moves them at? (A study, not a test.)

For each pool size P of a ``paper-pool-sweep-*`` scenario (TAP knobs fixed, as in
docs/communication.md), plans one step (``api.step_plan``: no simulation) and averages over the
step's workers the bytes each sends to other workers in one layer's forward attention exchange
(dispatch + return, off the diagonal, over the step's microbatches), split into the share that
stays inside a worker's node and the share that leaves it. With ``--simulate`` it also runs
the step (fast mode) and prints the exchange's seconds per GPU (exposed + hidden, every layer,
forward and backward) and per layer: with bytes per worker that do not grow, a per-layer time
that grows is the rate falling.

    python benchmarks/pool_bytes_vs_rate.py [--scenario paper-pool-sweep-256k] [--simulate]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from libra_des.api import load_scenario, simulate, step_plan

ROOT = Path(__file__).resolve().parents[1]
FIXED = ("balancer.heads_split=1", "balancer.block_size=16384", "steps=1")


def exchange_bytes(scenario: Path, pool: int) -> tuple[float, float, int]:
    """(bytes per worker inside its node, leaving its node, workers per pool).

    A worker belongs to one pool for the whole step (one of the DP/P pipelines) and exchanges
    in each of its microbatches: its bytes are its pool's, summed over the microbatches, over
    the pool's workers. Averaged over every worker of the step (the DP/P pools together), not
    summed over the pools: a pool's per-worker bytes are per worker only once.
    """
    overrides = [f"balancer.pool_size={pool}", *FIXED]
    plan = step_plan(scenario, overrides)
    sc = load_scenario(scenario, overrides)
    gpn = 8  # the shipped H200 topologies
    cp = sc.parallelism.cp
    local = remote = 0.0
    workers = 0
    gpus = 0
    for pipeline in plan.slots:  # one pool's microbatches, slot by slot
        workers = pipeline[0].workers  # the pool's workers: P replicas x CP GPUs
        gpus += workers
        # Pool workers are P replicas x CP GPUs, packed: worker i on GPU i of the pool.
        node = np.arange(workers) // gpn if cp * pool >= gpn else np.zeros(workers, int)
        same = node[:, None] == node[None, :]
        for attn in pipeline:
            for m in (attn.dispatch_bytes, attn.return_bytes):
                off = m * (1 - np.eye(workers))
                local += float((off * same).sum())
                remote += float((off * ~same).sum())
    return local / gpus, remote / gpus, workers


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", default="paper-pool-sweep-256k")
    ap.add_argument("--pools", default="2,4,8,16,32,64")
    ap.add_argument("--simulate", action="store_true")
    args = ap.parse_args()
    path = ROOT / "scenarios" / f"{args.scenario}.yaml"
    print(f"{args.scenario}: per worker, one layer's forward attention exchange over the step's "
          "microbatches (TAP knobs fixed)")
    print("   P  workers  in-node GB  cross-node GB  comm s (step)  comm ms per layer")
    for p in (int(x) for x in args.pools.split(",")):
        local, remote, workers = exchange_bytes(path, p)
        line = f"{p:4d} {workers:8d} {local / 1e9:11.3f} {remote / 1e9:14.3f}"
        if args.simulate:
            overrides = [f"balancer.pool_size={p}", *FIXED]
            res = simulate(path, overrides)
            secs = float(res["attention_comm_exposed_s"]) + float(res["attention_comm_hidden_s"])
            layers = load_scenario(path, overrides).model.layers
            line += f" {secs:14.2f} {1e3 * secs / layers:18.1f}"
        print(line, flush=True)

if __name__ == "__main__":
    main()
