"""AllGather versus All2All dispatch when the EP group spans nodes (topology study).

Qwen3-235B-A22B prefill, 32 requests x 1024 tokens per node (the paper's per-node breakdown
setting), EP over 1, 2 and 4 nodes of ``h200-roce-railopt`` (8x400G RoCE) and ``h100-ib-ndr``
(8x NDR InfiniBand). Per (fabric, nodes) one routing trace is generated and served by Libra
with AllGather and with All2All dispatch, and by SGLang (All2All, the reference). Dispatch and
combine are priced by the network layer (``CostModel.collective`` / ``all_to_allv`` with the
group's per-node layout). Prints a table (MoE layer ms, exposed dispatch + combine ms), writes
it as CSV and, when matplotlib is installed (the ``figs`` extra), a small figure.

    .venv/bin/python benchmarks/moe_multinode_dispatch.py [--layers 3] [--nodes 1,2,4]
        [--out docs/figures/moe_multinode_dispatch]
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path
from typing import Any

import numpy as np

from libra_des.config import load_scenario
from libra_des.results.moe_metrics import simulate_moe
from libra_des.sim.moe.batch import BatchPlanner

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "paper-moe-breakdown.yaml"
FABRICS = {
    "h200-roce-railopt": ["topology=h200-roce-railopt"],
    "h100-ib-ndr": ["topology=h100-ib-ndr", "profile=h100-sxm"],
}
SYSTEMS = {
    "libra-allgather": ["balancer.policy=libra", "balancer.dispatch=allgather"],
    "libra-all2all": ["balancer.policy=libra", "balancer.dispatch=all2all"],
    "sglang-all2all": ["balancer.policy=sglang", "balancer.dispatch=all2all"],
}


def measure(sets: list[str], traces: Any) -> tuple[float, float]:
    r = simulate_moe(load_scenario(SCENARIO, sets), np.random.default_rng(0), traces=traces)
    b = r["layer_breakdown_s"]
    comm = b["dispatch"]["exposed"] + b["combine"]["exposed"]
    return 1e3 * float(r["moe_layer_s"]), 1e3 * float(comm)


def study(layers: int, nodes: list[int]) -> list[dict[str, Any]]:
    rows = []
    for fabric, fabric_sets in FABRICS.items():
        for n in nodes:
            base = [f"model.layers={layers}", "workload.batches=1", f"workload.batch={32 * n}",
                    "variance.enabled=false", *fabric_sets, f"topology_params={{nodes: {n}}}",
                    f"parallelism.ep={8 * n}"]
            sc = load_scenario(SCENARIO, base)
            planner = BatchPlanner.build(sc, sc.parallelism.ep, np.random.default_rng(n))
            traces = [planner.trace(0)]
            for name, sets in SYSTEMS.items():
                layer, comm = measure([*base, *sets], traces)
                rows.append({"fabric": fabric, "nodes": n, "system": name,
                             "moe_layer_ms": round(layer, 4), "exposed_comm_ms": round(comm, 4)})
                print(rows[-1], flush=True)
    return rows


def figure(rows: list[dict[str, Any]], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed (figs extra): no figure")
        return
    fig, axes = plt.subplots(1, len(FABRICS), figsize=(4 * len(FABRICS), 3), sharey=True)
    for ax, fabric in zip(np.atleast_1d(axes), FABRICS, strict=True):
        for name in SYSTEMS:
            pts = [(r["nodes"], r["moe_layer_ms"]) for r in rows
                   if r["fabric"] == fabric and r["system"] == name]
            ax.plot(*zip(*pts, strict=True), marker="o", label=name)
        ax.set_title(fabric)
        ax.set_xlabel("nodes (EP = 8 x nodes)")
    np.atleast_1d(axes)[0].set_ylabel("MoE layer (ms)")
    np.atleast_1d(axes)[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--nodes", default="1,2,4")
    parser.add_argument("--out", default=str(ROOT / "docs" / "figures" /
                                             "moe_multinode_dispatch"))
    args = parser.parse_args()
    rows = study(args.layers, [int(n) for n in args.nodes.split(",")])
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.with_suffix(".csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {out.with_suffix('.csv')}")
    figure(rows, out.with_suffix(".png"))


if __name__ == "__main__":
    main()
