"""``libra-des run SCENARIO``: simulate a scenario and write ``DIR/result.json``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from libra_des import kinds
from libra_des.commands.common import dumps, int_list, write_atomic
from libra_des.config import load_scenario
from libra_des.config.validation import check_output_dir
from libra_des.kinds.preflight import check_feasible, trace_ranks
from libra_des.kinds.simulation import simulate
from libra_des.results.outputs import claim, default_folder, remove_stale


def register(subs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subs.add_parser("run", help="simulate a scenario and write result.json")
    p.add_argument("scenario", help="scenario YAML file")
    p.add_argument("--out", default=None, help="output folder (default runs/<scenario name>)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a scenario field, e.g. parallelism.dp=16 (repeatable)")
    p.add_argument("--trace", action="store_true", help="also write DIR/trace.json (Perfetto)")
    p.add_argument("--trace-ranks", default=None, help="rank groups to trace, e.g. 0,1,2")
    p.add_argument("--json", action="store_true", help="print result.json to stdout")
    p.add_argument("--table", action="store_true",
                   help="also write DIR/result.csv (and result.parquet with the tables extra)")
    p.add_argument("--no-preflight", action="store_true",
                   help="run even when the memory/time estimate exceeds this machine")
    p.set_defaults(handler=handle)


def summary_table(result: dict[str, Any], title: str) -> Table:
    """Readable summary of the headline metrics."""
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in summary_rows(result):
        table.add_row(key, value)
    return table


def summary_rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    """The headline rows of the result's kind (:mod:`libra_des.kinds`)."""
    return kinds.of_result(r).summary(r)


def handle(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario, args.set)
    parsed = None if args.trace_ranks is None else int_list("--trace-ranks", args.trace_ranks, 0)
    ranks = trace_ranks(scenario, args.trace, args.trace_ranks, parsed)
    if not args.no_preflight:
        check_feasible(scenario)
    out = Path(args.out) if args.out else default_folder(args.scenario)
    tables = ("result.csv", "result.parquet") if args.table else ()
    check_output_dir(out, "--out", ("result.json", "trace.json", *tables))
    if not args.out and out.name != Path(args.scenario).stem:
        sys.stderr.write(f"note: runs/{Path(args.scenario).stem} holds another scenario's "
                         f"results; writing to {out}\n")
    result, trace = simulate(scenario, progress=not args.json, trace_ranks=ranks,
                             want_trace=args.trace)
    write_atomic(out / "result.json", dumps(result) + "\n")
    if not args.out:
        claim(out, args.scenario)
    if trace is not None:
        write_atomic(out / "trace.json", json.dumps(trace))
    if args.table:
        from libra_des.results.tables import write_run_table

        write_run_table(result, out)
    remove_stale(out, {"trace.json"} if trace is not None else set())
    if args.json:
        print(dumps(result))
    else:
        Console().print(summary_table(result, f"{Path(args.scenario).name} -> {out}/result.json"))
    return 0
