"""Where an MoE run's CPU goes, against a bare SimPy loop: the floor under the 6x budget (not
a test).

In one process, with the routing drawn in the run (no helper process), for ``--scenario``:

* ``generate``: the run's routing batches drawn as the run draws them (latent AR(1) steps,
  logits, softmax weights, top-k draws);
* ``no draws``: the same batches from a generator with ``top_k = 0``: the latent steps, every
  expert's logit and weight, and no draw. Every exact sampler of the same law does at least
  this much, since each expert's logit enters every draw probability of its token;
* ``latents``: the AR(1) steps alone (the normals);
* ``simulate``: ``simulate_moe`` with the generated batches handed in (prediction, planning,
  SimPy, costing), less ``validate``, the check that handed-in batches hold no repeated
  experts, which a run drawing its own batches does not make.

Each part is timed ``--repeats`` times, each right after a bare loop of 1 M timeouts
(``scale_study.bare_loop_cpu``); printed: the median CPU seconds and the median of the
paired ratios. ``run`` adds generate and simulate; ``floor`` adds no-draws and simulate: the
least CPU a run can take with the same routing law and this simulation.

    python benchmarks/moe_floor.py [--scenario moe-qwen3-235b] [--repeats 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Callable

import numpy as np
from scale_study import bare_loop_cpu  # benchmarks/scale_study.py (the script's folder)

from libra_des.config import ROOT, load_scenario
from libra_des.config import MoeScenario as Scenario
from libra_des.results.moe_metrics import simulate_moe
from libra_des.sim.moe.batch import BatchPlanner
from libra_des.sim.moe.setup import batch_lengths
from libra_des.workload.routing import RoutingTrace, TokenLatents, check_experts


def planner(scenario: Scenario, top_k: int | None = None) -> BatchPlanner:
    """A batch planner drawing from the run's own routing stream (a fresh copy each time),
    its router's ``top_k`` replaced where given."""
    trace_rng = np.random.default_rng(scenario.seed).spawn(4)[0]  # as simulate_moe spawns
    built = BatchPlanner.build(scenario, scenario.parallelism.ep, trace_rng, draws_only=True)
    if top_k is None:
        return built
    assert built.router is not None, "a generated workload"
    return dataclasses.replace(built, router=dataclasses.replace(built.router, top_k=top_k))


def latents_only(scenario: Scenario) -> None:
    """The AR(1) steps of every batch and layer, without logits or draws."""
    plan = planner(scenario)
    assert plan.router is not None
    w = scenario.workload
    for _ in range(plan.batches):
        latents = TokenLatents.of(plan.router, batch_lengths(w.seq_len, w.batch))
        state = latents.initial(plan.rng)
        for _ in range(plan.router.gate.shape[0] - 1):
            state.step(latents.rho, plan.rng)


def validate(scenario: Scenario, traces: list[RoutingTrace]) -> None:
    m = scenario.model
    for trace in traces:
        check_experts("traces", trace.experts, m.experts, m.layers - m.dense_layers, m.top_k)


def timed(work: Callable[[], object], repeats: int, bares: list[float]) -> tuple[float, float]:
    """(median CPU seconds, median of CPU over the bare loop timed just before); each bare
    loop's seconds appended to ``bares``."""
    pairs = []
    for _ in range(repeats):
        bare = bare_loop_cpu()
        bares.append(bare)
        c0 = time.process_time()
        work()
        pairs.append((time.process_time() - c0, bare))
    return statistics.median(c for c, _ in pairs), statistics.median(c / b for c, b in pairs)


def plus(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    return a[0] + b[0], a[1] + b[1]


def minus(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    return a[0] - b[0], a[1] - b[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="moe-qwen3-235b")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats: got {args.repeats}; allowed: at least 1")
    path = ROOT / "scenarios" / f"{args.scenario}.yaml"
    scenario = load_scenario(path) if path.is_file() else None
    if scenario is None or scenario.kind != "moe_inference":
        parser.error(f"--scenario: got {args.scenario}; allowed: an MoE scenario of scenarios/")
    first = planner(scenario)
    traces = [first.trace(b) for b in range(first.batches)]  # also warms every kernel

    def generate(top_k: int | None = None) -> None:
        plan = planner(scenario, top_k)
        for b in range(plan.batches):
            plan.trace(b)

    def simulate() -> None:
        simulate_moe(scenario, np.random.default_rng(scenario.seed), traces=traces, prefetch=False)

    simulate()  # warm
    bares: list[float] = []
    parts = {
        "generate": timed(generate, args.repeats, bares),
        "no draws": timed(lambda: generate(0), args.repeats, bares),
        "latents": timed(lambda: latents_only(scenario), args.repeats, bares),
        "simulate + validate": timed(simulate, args.repeats, bares),
        "validate": timed(lambda: validate(scenario, traces), args.repeats, bares),
    }
    parts["simulate"] = minus(parts["simulate + validate"], parts["validate"])
    parts["run"] = plus(parts["generate"], parts["simulate"])
    parts["floor"] = plus(parts["no draws"], parts["simulate"])
    print(
        f"{args.scenario}: {len(traces)} batches x {traces[0].tokens:,} tokens x "
        f"{traces[0].layers} layers; medians of {args.repeats}; bare loops "
        f"{min(bares):.2f}-{max(bares):.2f} s (median {statistics.median(bares):.2f})"
    )
    print(f"{'part':<22}{'CPU s':>8}{'x bare':>8}")
    for name, (cpu, ratio) in parts.items():
        print(f"{name:<22}{cpu:>8.2f}{ratio:>8.2f}")
    print(
        "'x bare': the median of each repeat's CPU over a bare loop of 1 M timeouts timed "
        "just before it ('run' and 'floor': sums of those medians)"
    )


if __name__ == "__main__":
    main()
