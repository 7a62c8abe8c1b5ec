"""``libra-des explain RESULT_A RESULT_B [--json] [--components a,b]``: why run A beats run B.

The split is the API's (:func:`libra_des.api.explain.explain`): each measure's difference (A
minus B: step time, attention straggler) in components that add up to it; this command prints
them as a table, or as JSON with ``--json``.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from libra_des.api.explain import components, explain
from libra_des.api.numbers import with_unit
from libra_des.commands.common import dumps, parse_list
from libra_des.commands.tables import print_table

if TYPE_CHECKING:
    from libra_des.api.explain import Explanation

#: Each component in words (definitions: docs/model.md, "Why one run beats another").
WORDS = {
    "balanced_work": "balanced work",
    "kernel_efficiency": "kernel efficiency (tile, chunk sizes)",
    "intra_pool_imbalance": "intra-pool imbalance",
    "inter_pool_imbalance": "inter-pool imbalance",
    "pipeline_bubble": "pipeline bubble",
    "comm_bytes": "exposed comm: bytes",
    "comm_rate": "exposed comm: rate",
    "contention": "exposed comm: contention",
    "interference": "interference",
    "runtime_noise": "runtime noise",
    "scheduler": "scheduler (planning)",
}


def register(subs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subs.add_parser(
        "explain", help="why run A beats run B: the difference split into components",
        description="Split the difference between two training runs of the same cluster and "
        "workload (A minus B: step time and attention straggler) into components that add up "
        "to it: balanced work, kernel efficiency, intra- and inter-pool imbalance, pipeline "
        "bubble, exposed communication (bytes, rate, contention), interference, runtime "
        "noise, scheduler.",
        epilog="examples:\n  libra-des explain runs/libra runs/ulysses\n"
        "  libra-des explain a/result.json b/result.json --json\n",
    )
    p.add_argument("a", metavar="RESULT_A", help="result.json or run folder (A)")
    p.add_argument("b", metavar="RESULT_B", help="result.json or run folder (B)")
    p.add_argument("--components", default=None, metavar="LIST",
                   help="comma-separated components to keep: " + ",".join(components()))
    p.add_argument("--json", action="store_true", help="print the split as JSON")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    only = None if args.components is None else parse_list("--components", args.components, str)
    found = explain(args.a, args.b, only)
    if args.json:
        print(dumps(found.as_dict()))
        return 0
    out = Console()
    print_table(table(found), console=out, pipe_width=140)
    for s in found.splits:
        if not s.adds_up:
            left = with_unit(s.unexplained, "s")
            out.print(f"[red]{s.measure}: the components leave {left} of the difference "
                      "unexplained[/red]")
    return 0


def signed(value: float, unit: str) -> str:
    """A difference in its unit with its sign (``+1.20 ms``, ``-3.40 %``). Under a picosecond
    it is the floating-point rounding of sums of microsecond-scale times, shown as 0 (as the
    report's table does)."""
    value = 0.0 if abs(value) < 1e-12 else value
    return ("+" if value >= 0 else "") + with_unit(value, unit)


def table(found: Explanation) -> Table:
    """One row per component: its share of each measure's difference (A minus B)."""
    pa, pb = found.policies
    t = Table(title=f"{found.a} ({pa}) minus {found.b} ({pb})")
    t.add_column("component", justify="left")
    for s in found.splits:
        t.add_column(s.measure, justify="right")
        t.add_column("% of diff", justify="right")

    def cells(value: float, total: float) -> list[str]:
        share = signed(value / total, "share") if total else "-"
        return [signed(value, "s"), share]

    names = list(found.splits[0].components) if found.splits else []
    for name in names:
        row = [WORDS.get(name, name)]
        for s in found.splits:
            row += cells(s.components[name], s.difference)
        t.add_row(*row)
    t.add_section()
    for label, pick in (("measured A", "a"), ("measured B", "b"), ("difference", "difference"),
                        ("unexplained (rounding)", "unexplained")):
        row = [label]
        for s in found.splits:
            row += [signed(float(getattr(s, pick)), "s"), ""]
        t.add_row(*row)
    return t
