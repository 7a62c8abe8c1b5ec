"""Fast versus detailed fidelity: the consistency table (docs/communication.md).

Two parts, not a test (the quick part is ``tests/test_fast_fabric.py``):

- ``--part fabric``: every shipped topology, a uniform all-to-all filling clusters of
  several node counts and leaf fan-outs, priced by the fast model (alpha-beta without
  efficiencies, the flow model's own terms; its default mechanisms, PXN on, or with
  ``--pxn off`` none) and run as flows on the same routes (PXN proxies where fast mode's
  PXN is in force); detailed over fast;
- ``--part scenarios``: the shipped scenarios small enough for the flow network, one step
  each at its own settings (any ``network`` section of the scenario, e.g. its ECMP hash,
  is read as the scenario gives it; ``--set`` adds overrides): step time, attention
  straggler, exposed and hidden exchange, and the two ratios the suite bounds (10%).

    python benchmarks/fidelity.py [--part fabric|scenarios|both] [--pxn on|off]
                                  [--scenarios a,b] [--set key=value ...]
"""

from __future__ import annotations

import argparse

import simpy

from libra_des.commands.run import simulate
from libra_des.config import ROOT, load_scenario
from libra_des.hardware.collectives.alltoall import Mechanisms
from libra_des.hardware.costs import CostModel
from libra_des.hardware.fabric.topology import load_topology, shipped_topologies
from libra_des.hardware.profiles.profile import load_profile
from libra_des.sim.network.flow.flow_model import Network
from libra_des.sim.network.models import flow_topology

SMALL = (
    "paper-attention-microbench-256k",
    "paper-dp-scaling-256k",
    "paper-attention-microbench-1m",
    "paper-dp-scaling-1m",
    "paper-pp-microbatch-256k",
)
KEYS = ("step", "straggler", "exposed", "hidden")
#: (nodes, leaf fan-out or None for the file's) per topology of the fabric part.
SHAPES = ((8, None), (8, 4), (16, 8), (32, None))
PER_GPU = 64 << 20


def a2a_pair(
    name: str, nodes: int, fan_out: int | None, pxn: bool = True
) -> tuple[int, float, float]:
    params: dict[str, object] = {"nodes": nodes}
    if fan_out is not None:
        params["levels.1.fan_out"] = fan_out
    topo = load_topology(name, params)
    n = topo.num_gpus
    cost = CostModel(load_profile("h200-sxm"), topo.fabric(), efficiency=False)
    cost.a2a_on = Mechanisms(pxn=pxn)
    fast = cost.collective("all_to_all", PER_GPU * n, n, topo.gpus_per_node).seconds
    env = simpy.Environment()
    net = Network(env, flow_topology(topo, cost))  # relayed as fast mode's PXN is
    env.run(net.collective("all_to_all", list(range(n)), PER_GPU * n))
    return n, fast, env.now


def fabric_part(pxn: bool = True) -> None:
    print(f"{'topology':<26}{'nodes':>6}{'fan_out':>8}{'GPUs':>6}{'fast ms':>10}"
          f"{'flows ms':>10}{'d/f':>7}")
    for name in shipped_topologies():
        for nodes, fan in SHAPES:
            if name == "gb200-nvl72" and nodes > 2:
                nodes = 2  # 72 GPUs a node: two racks already hold 144
            if name.startswith("h200-8x") or name == "pcie-8x":
                fan = None
            n, fast, det = a2a_pair(name, nodes, fan, pxn)
            print(f"{name:<26}{nodes:>6}{fan or '-':>8}{n:>6}{fast * 1e3:>10.2f}"
                  f"{det * 1e3:>10.2f}{det / fast:>7.3f}", flush=True)


def figures(name: str, fidelity: str, extra: list[str]) -> dict[str, float]:
    scenario = load_scenario(
        ROOT / "scenarios" / f"{name}.yaml", ["steps=1", f"fidelity={fidelity}", *extra]
    )
    res, _ = simulate(scenario)
    return {
        "step": res["step_time_s"]["mean"],
        "straggler": res["attention_straggler_s"]["mean"],
        "exposed": res["attention_comm_exposed_s"],
        "hidden": res["attention_comm_hidden_s"],
    }


def scenario_part(names: list[str], extra: list[str]) -> None:
    print(f"{'scenario':<34}" + "".join(f"{k + ' f/d':>22}" for k in KEYS)
          + f"{'step d/f':>10}{'exposed d/f':>12}")
    for name in names:
        fast, det = figures(name, "fast", extra), figures(name, "detailed", extra)
        cells = "".join(f"{fast[k]:>11.4g}{det[k]:>11.4g}" for k in KEYS)
        exposed = det["exposed"] / fast["exposed"] if fast["exposed"] > 0 else float("nan")
        print(f"{name:<34}{cells}{det['step'] / fast['step']:>10.4f}{exposed:>12.4f}",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("fabric", "scenarios", "both"), default="both")
    parser.add_argument("--pxn", choices=("on", "off"), default="on",
                        help="the fabric part's PXN, in both modes (default on)")
    parser.add_argument("--scenarios", default=",".join(SMALL))
    parser.add_argument("--set", action="append", default=[])
    args = parser.parse_args()
    if args.part in ("fabric", "both"):
        fabric_part(args.pxn == "on")
    if args.part in ("scenarios", "both"):
        scenario_part(args.scenarios.split(","), args.set)


if __name__ == "__main__":
    main()
