"""``libra-des quickstart``: the main job of ``make run`` on built-in defaults.

Runs ``scenarios/quickstart.yaml`` (1,024 GPUs, 1M corpus, Libra Full) and the same scenario
with Ulysses, and prints both summaries side by side with Libra's speed-up.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.status import Status
from rich.table import Table

from libra_des.api import load_training, shipped_path
from libra_des.api.numbers import sig3, with_unit
from libra_des.api.outputs import (
    RUN_RECORD,
    check_ours,
    check_output_dir,
    check_report_path,
    dumps,
    write_atomic,
)
from libra_des.api.runs import check_feasible, run_record, summary_rows
from libra_des.api.seeds import (
    SeededRun,
    check_seeds,
    run_seeds,
    seeds_text,
    seeds_title,
    with_speedup,
)
from libra_des.commands.run import spread_table
from libra_des.commands.tables import print_table

DEFAULT = shipped_path("scenarios/quickstart.yaml")


def register(subs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subs.add_parser("quickstart", help="run the quickstart scenario: Libra Full vs Ulysses")
    p.add_argument("--scenario", default=str(DEFAULT), help="scenario to compare policies on")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a scenario field (repeatable)")
    p.add_argument("--no-preflight", action="store_true",
                   help="run even when the memory/time estimate exceeds this machine")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="also write DIR/<policy>/result.json and DIR/report.html")
    p.add_argument("--seeds", default="1", metavar="N",
                   help="run each policy at N seeds derived from the scenario's seed: every "
                   "headline metric as mean ± std (min – max) and the speed-up with a paired "
                   "t interval (default 1)")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    count = check_seeds(args.seeds)
    console = Console()
    results: dict[str, dict[str, Any]] = {}
    scenarios = {p: load_training(args.scenario, [*args.set, f"balancer.policy={p}"],
                                  "quickstart compares policies")
                 for p in ("libra", "ulysses")}  # both validated before any work
    for scenario in scenarios.values():
        if not args.no_preflight:
            check_feasible(scenario)
    if args.out:  # every output path checked before the first simulation
        check_output_dir(Path(args.out), "--out", ("report.html",))
        check_report_path(Path(args.out) / "report.html")
        for policy in scenarios:
            check_output_dir(Path(args.out) / policy, "--out", ("result.json",))
            check_ours(Path(args.out) / policy, ("result.json",), "--out")
    timings: dict[str, dict[str, Any]] = {}
    seeded: dict[str, SeededRun] = {}
    for policy, scenario in scenarios.items():
        what = f"simulating {scenario.name} with {policy}"
        with console.status(f"{what} ...") as status:
            seeded[policy] = run_seeds(scenario, count, advance=progress(status, what, count))
        results[policy], timings[policy] = seeded[policy].result, seeded[policy].timings[0]
    results["libra"] = with_speedup(seeded["libra"], seeded["ulysses"], "ulysses")
    table = Table(title=f"{args.scenario}: one training step, Libra Full vs Ulysses")
    table.add_column("metric")
    for policy in results:
        table.add_column(policy, justify="right")
    rows = {p: dict(summary_rows(r | timings[p])) for p, r in results.items()}
    for key in rows["libra"]:
        table.add_row(key, *(rows[p].get(key, "") for p in results))
    print_table(table, console=console)
    speedup = results["ulysses"]["step_time_s"]["mean"] / results["libra"]["step_time_s"]["mean"]
    console.print(f"Libra Full step-time speed-up over Ulysses: {with_unit(speedup, 'x')}")
    if count > 1:
        print_spread(console, results)
    if args.out:
        write_outputs(Path(args.out), results, timings, console)
    return 0


def progress(status: Status, what: str, count: int) -> Callable[[int], None]:
    """Updates the spinner's text with the seed being simulated."""
    def advance(i: int) -> None:
        if count > 1:
            status.update(f"{what}, seed {i + 1} of {count} ...")
    return advance


def print_spread(console: Console, results: dict[str, dict[str, Any]]) -> None:
    """Each policy's headline metrics over the seeds, and the paired speed-up's interval."""
    for policy, result in results.items():
        print_table(spread_table(seeds_text(result), f"{policy}: {seeds_title(result)}"),
                    console=console)
    up = results["libra"]["seeds"]["speedup"]
    low, high = up["interval"]
    console.print(f"Libra Full speed-up over Ulysses over {len(up['per_seed'])} paired seeds: "
                  f"{with_unit(up['mean'], 'x')} ± {sig3(up['std'])} (min {sig3(up['min'])}, "
                  f"max {sig3(up['max'])}); 95% t interval {sig3(low)}-{with_unit(high, 'x')}",
                  highlight=False)


def write_outputs(out: Path, results: dict[str, dict[str, Any]],
                  timings: dict[str, dict[str, Any]], console: Console) -> None:
    """Each policy's result.json (and run.json) and one HTML report of both."""
    from libra_des.api.reports import drawer, render

    for policy, result in results.items():
        write_atomic(out / policy / "result.json", dumps(result) + "\n")
        write_atomic(out / policy / RUN_RECORD,
                     dumps(run_record(timings[policy], ["result.json"])) + "\n")
    with console.status("writing the report ..."):
        write_atomic(out / "report.html", render(out, draw=drawer()))
    console.print(f"report: {out / 'report.html'}", highlight=False)
