"""Does the pool-size sweep's communication level off because of the bytes TAP moves, or the
rate it moves them at? (A study, not a test.)

For each pool size P of a ``paper-pool-sweep-*`` scenario (TAP knobs fixed, as in
docs/communication.md), plans one step (``api.step_plan``: no simulation) and sums the bytes
every worker sends to other workers in the attention exchange (dispatch + return, off the
diagonal), split into the share that stays inside a worker's node and the share that leaves
it. With ``--simulate`` it also runs the step (fast mode) and divides the cross-node bytes by
the exchange's seconds (exposed + hidden): the rate the exchange moved at.

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
    """(bytes per worker inside its node, leaving its node, workers per pool)."""
    overrides = [f"balancer.pool_size={pool}", *FIXED]
    plan = step_plan(scenario, overrides)
    sc = load_scenario(scenario, overrides)
    gpn = 8  # the shipped H200 topologies
    cp = sc.parallelism.cp
    local = remote = 0.0
    workers = 0
    for slot in plan.slots:
        total = sum(a.workers for a in slot)  # every pool's workers: per-worker averages
        for attn in slot:
            w = attn.workers
            workers = w
            # Pool workers are P replicas x CP GPUs, packed: worker i on GPU i of the pool.
            node = np.arange(w) // max(gpn, 1) if cp * pool >= gpn else np.zeros(w, int)
            same = node[:, None] == node[None, :]
            for m in (attn.dispatch_bytes, attn.return_bytes):
                off = m * (1 - np.eye(w))
                local += float((off * same).sum()) / total
                remote += float((off * ~same).sum()) / total
    return local, remote, workers


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", default="paper-pool-sweep-256k")
    ap.add_argument("--pools", default="2,4,8,16,32,64")
    ap.add_argument("--simulate", action="store_true")
    args = ap.parse_args()
    path = ROOT / "scenarios" / f"{args.scenario}.yaml"
    print(f"{args.scenario}: per worker per step, attention exchange (TAP knobs fixed)")
    print("   P  workers  in-node GB  cross-node GB  comm s  cross-node GB/s")
    for p in (int(x) for x in args.pools.split(",")):
        local, remote, workers = exchange_bytes(path, p)
        line = f"{p:4d} {workers:8d} {local / 1e9:11.2f} {remote / 1e9:14.2f}"
        if args.simulate:
            res = simulate(path, [f"balancer.pool_size={p}", *FIXED])
            secs = float(res["attention_comm_exposed_s"]) + float(res["attention_comm_hidden_s"])
            line += f" {secs:7.2f} {remote / secs / 1e9 if secs > 0 else 0.0:16.2f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
