"""``libra-des sweep SCENARIO --grid KEY=V1,V2 [--zip K1=A,B;K2=C,D]``: resumable grids.

Points are the cartesian product of the axes (first axis outermost); each point's result goes
to ``OUT/points/<hash>.json`` and the index to ``OUT/sweep.json`` (see :mod:`libra_des.runs.sweep`).
A rerun of the same command skips every finished point.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from libra_des.api.numbers import show, with_unit
from libra_des.api.outputs import check_output_dir, claim, default_folder
from libra_des.api.runs import check_feasible
from libra_des.api.sweeps import (
    default_workers,
    max_workers,
    resolve_sweep,
    run_sweep_points,
    sigterm_as_interrupt,
    sweep_executor,
    sweep_spec,
)
from libra_des.commands.common import dumps, int_list
from libra_des.commands.tables import print_table
from libra_des.errors import InputError

if TYPE_CHECKING:
    from libra_des.api.sweeps import Executor, PointRecord, SweepResult, SweepSpec


def tagged(kind: str) -> Callable[[str], tuple[str, str]]:
    """Keep ``--grid`` and ``--zip`` in one list so the command-line order is the axis order."""

    def tag(text: str) -> tuple[str, str]:
        return kind, text

    tag.__name__ = kind
    return tag


def register(subs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subs.add_parser(
        "sweep",
        help="run a grid of scenario variants in parallel (resumable)",
        description="Run the cartesian product of --grid/--zip axes over a scenario. Results go "
        "to OUT/points/<hash>.json (hash of the resolved scenario: reruns skip finished points) "
        "and an index to OUT/sweep.json.",
    )
    p.add_argument("scenario", help="base scenario YAML file")
    p.add_argument("--grid", dest="axes", action="append", type=tagged("grid"), default=[],
                   metavar="KEY=V1,V2", help="one axis: each value in turn (repeatable)")
    p.add_argument("--zip", dest="axes", action="append", type=tagged("zip"),
                   metavar="K1=A,B;K2=C,D",
                   help="one axis whose keys move together, e.g. "
                   "'parallelism.dp=4,16;balancer.pool_size=4,8' (repeatable)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field of every point (repeatable)")
    p.add_argument("--out", default=None, help="output folder (default runs/sweep-<scenario>)")
    p.add_argument("--workers", default=None,
                   help=f"local worker processes (default min(2, cpus) = {default_workers()})")
    p.add_argument("--ray", action="store_true",
                   help="run points as Ray tasks on the cluster ray.init() finds")
    p.add_argument("--json", action="store_true", help="print sweep.json to stdout")
    p.add_argument("--no-preflight", action="store_true",
                   help="run points even when their memory/time estimate exceeds this machine")
    p.set_defaults(handler=handle)


def spec_from_args(args: argparse.Namespace) -> SweepSpec:
    return sweep_spec(args.scenario, args.axes, args.set)


def pick_executor(args: argparse.Namespace) -> Executor:
    if args.ray:
        if args.workers is not None:
            raise InputError("--workers", args.workers, "unset with --ray (Ray schedules tasks)")
        return sweep_executor(ray=True)
    workers = int_list("--workers", args.workers or str(default_workers()))
    if len(workers) != 1 or workers[0] > max_workers():
        raise InputError("--workers", args.workers, f"a single integer in 1..{max_workers()}")
    return sweep_executor(ray=False, workers=workers[0])


#: Short column titles for the headline metrics (the index keeps the full dotted names); the
#: cells carry their units (a rate's unit is its title: the cell is the number alone).
TITLES = {
    "tokens_per_s": "tokens/s",
    "step_time_s.mean": "step",
    "mfu": "MFU",
    "bubble_fraction": "bubble",
    "dp_straggler_fraction": "DP strag",
    "comm_exposed_fraction": "comm exp",
    "attention_straggler_s.mean": "attn strag",
    "attention_straggler_s.max": "attn strag max",
    "moe_layer_s": "MoE layer",
    "prefill_tokens_per_s": "prefill tok/s",
    "ttft_s.mean": "TTFT",
    "imbalance_ratio.mean": "imbalance",
    "replica_waste_fraction": "replica waste",
}
#: Rates whose title names the unit.
RATES = ("tokens_per_s", "prefill_tokens_per_s")
#: Columns an 80-column terminal drops first (sweep.json keeps them all): the point's id
#: hash, then the metrics the others imply or refine.
SPARE = ("id", "attn strag max", "bubble", "DP strag", "MFU")


def cell(metrics: Mapping[str, float], name: str) -> str:
    """One metric of a point as its column shows it."""
    if name not in metrics:
        return "-"
    return with_unit(metrics[name]) if name in RATES else show(metrics[name], name)


def table(result: SweepResult) -> Table:
    """One row per point: its axis values and headline metrics."""
    keys = [k for axis in result.spec.axes for k in axis.keys]
    metrics = list(dict.fromkeys(m for r in result.records for m in r.metrics))
    t = Table(title=f"sweep {result.spec.scenario}: {len(result.records)} points -> "
              f"{result.out}/sweep.json")
    for name in ("#", "id"):
        t.add_column(name, justify="right")
    for key in keys:
        t.add_column(key.rsplit(".", 1)[-1], justify="left")
    for m in metrics:
        t.add_column(TITLES.get(m, m), justify="right")
    for n, r in enumerate(result.records):
        values = r.point.override_values()
        cells = [str(values[k]) for k in keys]
        shown = [cell(r.metrics, m) for m in metrics]
        t.add_row(str(n), r.point.id[:8], *cells, *(shown if not r.error else ["failed"]))
    return t


def report_failures(failed: Sequence[PointRecord]) -> None:
    for r in failed:
        sys.stderr.write(f"error: sweep point {r.point.id} {list(r.point.overrides)}: {r.error}\n")


def handle(args: argparse.Namespace) -> int:
    spec = spec_from_args(args)
    executor = pick_executor(args)
    points = resolve_sweep(spec)  # every point validated before any work starts
    if not args.no_preflight:
        for point in points:
            check_feasible(point.scenario)
    out = Path(args.out) if args.out else default_folder(args.scenario, "sweep-")
    check_output_dir(out, "--out", ("sweep.json",))
    for sub in ("points", "indexes"):
        if (out / sub).exists() and not (out / sub).is_dir():
            raise InputError("--out", str(out / sub), "a folder (this path is a file)")
    err = Console(stderr=True)
    try:
        with sigterm_as_interrupt(), Progress(console=err, transient=True,
                                              disable=not err.is_terminal) as bar:
            task = bar.add_task(f"sweep ({len(points)} points)",
                                total=len({p.id for p in points}))
            result = run_sweep_points(spec, out, executor, lambda n: bar.advance(task, n),
                                      points)
    except KeyboardInterrupt:
        done = len(list((out / "points").glob("*.json")))
        sys.stderr.write(f"interrupted: {done} finished points are kept in {out / 'points'}; "
                         "rerun the same command to resume\n")
        return 130
    if not args.out:
        claim(out, args.scenario)
    err.print(f"sweep: {len(points)} points, {result.ran} run, {result.reused} reused, "
              f"{len(result.failed)} failed -> {out / 'sweep.json'}", highlight=False)
    if args.json:
        print(dumps(result.index()))
    else:
        print_table(table(result), SPARE, pipe_width=160)
    if result.input_error is not None:
        raise result.input_error
    report_failures(result.failed)
    return 1 if result.failed else 0
