"""Where does AllGather dispatch stop paying off against All2All? (topology study)

Libra's two-stage execution dispatches with AllGather so MoE_local and CPU sharding need not
wait for the destinations; All2All moves fewer bytes but, for Libra, must wait for the
sharding metadata. This study runs Libra both ways (and SGLang's All2All for reference) on

* ``nvswitch``: one 8x H200 NVSwitch node (EP 8);
* ``roce-2node``: two such nodes over 8x 400G RoCE rail-optimised (EP 16);
* ``pcie``: 8 GPUs on PCIe Gen4 behind two switches and one host bridge (EP 8; the GPU is
  set to H200-NVL, an H200 without NVLink bridges, so the model fits; compute still uses the
  H200 SXM profile, so only the fabric differs);

over the tokens per request (``seq_len``) at batch 32, reporting the MoE layer time (ms). The
crossover is where the faster dispatch for Libra changes along the lengths. The SGLang column
shows where Libra's benefit vanishes (short inputs: the replica copies and CPU sharding no
longer hide behind MoE_local).

    .venv/bin/python benchmarks/moe_topology_study.py [--layers 6] [--seqs 64,128,...,4096]
"""

from __future__ import annotations

import argparse
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from libra_des.config import load_scenario
from libra_des.results.moe_metrics import simulate_moe
from libra_des.sim.moe.batch import BatchPlanner

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "paper-moe-breakdown.yaml"
TOPOLOGIES = {
    "nvswitch": ["topology=h200-8x-nvswitch", "parallelism.ep=8"],
    "roce-2node": ["topology=h200-roce-railopt", "topology_params={nodes: 2}",
                   "parallelism.ep=16"],
    "pcie": ["topology=pcie-8x", "topology_params={gpu: H200-NVL}", "parallelism.ep=8"],
}
SYSTEMS = {
    "libra-allgather": ["balancer.policy=libra", "balancer.dispatch=allgather"],
    "libra-all2all": ["balancer.policy=libra", "balancer.dispatch=all2all"],
    "sglang-all2all": ["balancer.policy=sglang", "balancer.dispatch=all2all"],
}


def layer_ms(sets: list[str], traces: Any) -> float:
    scenario = load_scenario(SCENARIO, sets)
    return 1e3 * float(simulate_moe(scenario, np.random.default_rng(0), traces=traces)
                       ["moe_layer_s"])


def study(layers: int, seqs: list[int]) -> dict[str, dict[int, dict[str, float]]]:
    out: dict[str, dict[int, dict[str, float]]] = {}
    for topo, topo_sets in TOPOLOGIES.items():
        out[topo] = {}
        for seq in seqs:
            base = [f"model.layers={layers}", "workload.batches=1", f"workload.seq_len={seq}",
                    "variance.enabled=false", *topo_sets]
            sc = load_scenario(SCENARIO, base)
            planner = BatchPlanner.build(sc, sc.parallelism.ep, np.random.default_rng(seq))
            traces = [planner.trace(0)]
            out[topo][seq] = {name: layer_ms([*base, *sets], traces)
                              for name, sets in SYSTEMS.items()}
    return out


def crossover(rows: dict[int, dict[str, float]]) -> str:
    """Which dispatch wins for Libra over which lengths, and where the winner changes."""
    winner = {seq: "All2All" if r["libra-all2all"] < r["libra-allgather"] else "AllGather"
              for seq, r in sorted(rows.items())}
    seqs = list(winner)
    changes = [f"{winner[a]} up to {a}, {winner[b]} from {b}"
               for a, b in pairwise(seqs) if winner[a] != winner[b]]
    return "; ".join(changes) if changes else f"{winner[seqs[0]]} wins at every length"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--seqs", default="64,128,256,512,1024,2048,4096")
    args = parser.parse_args()
    seqs = [int(s) for s in args.seqs.split(",")]
    table = study(args.layers, seqs)
    names = list(SYSTEMS)
    print("MoE layer time (ms), batch 32, Qwen3-235B-A22B, mixed stream")
    print(f"{'topology':>10} | {'seq_len':>7} | " + " | ".join(f"{n:>15}" for n in names))
    for topo, rows in table.items():
        for seq, r in rows.items():
            print(f"{topo:>10} | {seq:>7} | " + " | ".join(f"{r[n]:15.3f}" for n in names))
    print("\ncrossover (Libra AllGather vs All2All):")
    for topo, rows in table.items():
        print(f"  {topo:>10}: {crossover(rows)}")


if __name__ == "__main__":
    main()
