"""``libra-des run SCENARIO``: simulate a scenario and write ``DIR/result.json``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from libra_des.api import load_scenario
from libra_des.api.chakra import check_chakra_export, export_chakra
from libra_des.api.outputs import (
    RUN_RECORD,
    check_ours,
    check_output_dir,
    claim,
    default_folder,
    remove_stale,
)
from libra_des.api.runs import (
    check_feasible,
    run_record,
    simulate_scenario,
    summary_rows,
    trace_ranks,
)
from libra_des.api.seeds import check_seeds, run_seeds, seeds_text, seeds_title
from libra_des.commands.common import dumps, int_list, write_atomic
from libra_des.commands.tables import print_table

#: Scripts and benchmarks run a scenario from here: (scenario) -> (result, trace).
simulate = simulate_scenario

#: Runs estimated longer than this get a one-line note with the estimate (our choice).
ESTIMATE_NOTE_S = 10.0


def register(subs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subs.add_parser("run", help="simulate a scenario and write result.json")
    p.add_argument("scenario", help="scenario YAML file")
    p.add_argument("--out", default=None, help="output folder (default runs/<scenario name>)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a scenario field, e.g. parallelism.dp=16 (repeatable)")
    p.add_argument("--trace", action="store_true", help="also write DIR/trace.json (Perfetto)")
    p.add_argument("--trace-ranks", default=None, help="rank groups to trace, e.g. 0,1,2")
    p.add_argument("--chakra", default=None, metavar="DIR",
                   help="also write the simulated step as Chakra ET, one file per rank")
    p.add_argument("--json", action="store_true", help="print result.json to stdout")
    p.add_argument("--table", action="store_true",
                   help="also write DIR/result.csv (and result.parquet with the tables extra)")
    p.add_argument("--progress", action="store_true",
                   help="show the progress bar even with --json, and the preflight's time "
                   "estimate off a terminal")
    p.add_argument("--no-preflight", action="store_true",
                   help="run even when the memory/time estimate exceeds this machine")
    p.add_argument("--seeds", default="1", metavar="N",
                   help="run N seeds derived from the scenario's seed; result.json gains a "
                   "'seeds' section with each headline metric's mean, std, min and max "
                   "(default 1: the single-seed run)")
    p.set_defaults(handler=handle)


def summary_table(result: dict[str, Any], title: str) -> Table:
    """Readable summary of the headline metrics."""
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in summary_rows(result):
        table.add_row(key, value)
    return table


def seeds_table(result: dict[str, Any]) -> Table | None:
    """Each headline metric as mean ± std (min, max; N seeds, S steps), or None for one
    seed."""
    rows = seeds_text(result)
    if not rows:
        return None
    return spread_table(rows, f"{seeds_title(result)} (the table above: the first seed)")


def spread_table(rows: list[tuple[str, str, str]], title: str) -> Table:
    """(metric, mean ± std, min – max) rows under ``title``."""
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("mean ± std", justify="right")
    table.add_column("min – max", justify="right")
    for row in rows:
        table.add_row(*row)
    return table


def handle(args: argparse.Namespace) -> int:
    count = check_seeds(args.seeds)
    scenario = load_scenario(args.scenario, args.set)  # the kind's checks too, before work
    parsed = None if args.trace_ranks is None else int_list("--trace-ranks", args.trace_ranks, 0)
    if args.chakra is not None:
        check_chakra_export(scenario, Path(args.chakra), trace_ranks=args.trace_ranks)
    ranks = trace_ranks(scenario, args.trace or args.chakra is not None, args.trace_ranks, parsed)
    if not args.no_preflight:
        estimate = check_feasible(scenario)
        # On a terminal (or with --progress) only: a pipe reading stderr expects nothing but
        # the one error line when the run later refuses its input.
        if estimate.seconds > ESTIMATE_NOTE_S and (args.progress or sys.stderr.isatty()):
            sys.stderr.write(f"note: estimated {estimate.text()} (preflight, an upper "
                             "estimate)\n")
    out = Path(args.out) if args.out else default_folder(args.scenario)
    tables = ("result.csv", "result.parquet") if args.table else ()
    files = ("result.json", *(("trace.json",) if args.trace else ()), *tables)
    check_output_dir(out, "--out", ("result.json", "trace.json", *tables))
    check_ours(out, files, "--out")
    if not args.out and out.name != Path(args.scenario).stem:
        sys.stderr.write(f"note: runs/{Path(args.scenario).stem} holds another scenario's "
                         f"results; writing to {out}\n")
    seeded = run_seeds(scenario, count, progress=args.progress or not args.json,
                       trace_ranks=ranks, want_trace=args.trace or args.chakra is not None)
    result, trace, timing = seeded.result, seeded.trace, seeded.timings[0]
    if count > 1:  # run.json: the wall clock of every seed (the first one's as before)
        timing = {**timing, "seeds_wall_s": [t.get("wall_s") for t in seeded.timings]}
    if args.chakra is not None and trace is not None:
        export_chakra(trace, Path(args.chakra))
    trace = trace if args.trace else None
    write_atomic(out / "result.json", dumps(result) + "\n")
    if not args.out:
        claim(out, args.scenario)
    if trace is not None:
        write_atomic(out / "trace.json", json.dumps(trace))
    if args.table:
        from libra_des.api.runs import write_run_table

        write_run_table(result, out)
    written = [f for f in files if (out / f).is_file()]  # result.parquet: with pyarrow only
    remove_stale(out, set(written))
    write_atomic(out / RUN_RECORD, dumps(run_record(timing, written)) + "\n")
    if args.json:
        print(dumps(result))
    else:
        title = f"{Path(args.scenario).name} -> {out}/result.json"
        console = Console()
        print_table(summary_table(result | timing, title), console=console)
        spread = seeds_table(result)
        if spread is not None:
            print_table(spread, console=console)
    return 0

