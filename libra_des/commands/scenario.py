"""``libra-des scenario show S [--set K=V ...] [--json]``: every field, its default, its source;
``libra-des scenario copy NAME DIR``: a shipped scenario copied into DIR to edit.

Each leaf of the validated scenario is listed with the value the run would use, the value it
would take if the key were left out (its model's default; ``required`` when it has none), and
where the value came from: ``--set``, the scenario file, the model or workload file the
scenario names (shown by its path relative to the repository), or ``default``.
"""

from __future__ import annotations

import argparse
from typing import Any

from libra_des.api.scenario_fields import scenario_fields
from libra_des.api.scenarios import copy_scenario
from libra_des.commands.common import dumps


def register(subs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subs.add_parser("scenario", help="inspect a scenario (every field, default, source) "
                        "or copy a shipped one")
    acts = p.add_subparsers(dest="action", required=True, parser_class=type(p))
    show = acts.add_parser("show", help="print every field with its default and source")
    show.add_argument("scenario", help="scenario YAML file")
    show.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                      help="override a field first, as `run --set` does (repeatable)")
    show.add_argument("--json", action="store_true", help='print {"fields": [...]} as JSON')
    show.set_defaults(handler=handle_show)
    copy = acts.add_parser("copy", help="copy a shipped scenario into a folder to edit")
    copy.add_argument("name", metavar="NAME", help="shipped scenario name (quickstart, ...)")
    copy.add_argument("folder", metavar="DIR", help="output folder (new, empty or ours)")
    copy.set_defaults(handler=handle_copy)


def handle_copy(args: argparse.Namespace) -> int:
    path = copy_scenario(args.name, args.folder)
    print(f"wrote {path}; run it with: libra-des run {path}")
    return 0


def handle_show(args: argparse.Namespace) -> int:
    table_rows = scenario_fields(args.scenario, args.set)
    if args.json:
        print(dumps({"fields": table_rows}))
        return 0
    from rich.table import Table

    from libra_des.commands.tables import print_table

    table = Table(title=f"{args.scenario}: {len(table_rows)} fields")
    for col in ("field", "value", "default", "source"):
        table.add_column(col, overflow="fold")
    for r in table_rows:
        table.add_row(r["field"], short(r["value"]), short(r["default"]), r["source"])
    print_table(table, ("default",), pipe_width=160)
    return 0


def short(value: Any) -> str:
    text = value if isinstance(value, str) else dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."
