"""``libra-des import chakra ET...``: run Chakra execution traces on a modelled fabric.

    libra-des import chakra TRACES [--topology NAME] [--profile P] [--json]

``TRACES``: ``.et`` files (``<prefix>.<rank>.et``) or folders of them, with an optional
``comm_group.json`` beside them (group name -> ranks, ASTRA-sim's comm-group file). Prints the
simulated step time, compute seconds, collective bytes per op and point-to-point bytes
(:mod:`libra_des.sim.chakra.replay` states the model). The topology is grown to as many nodes
as the ranks need.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from libra_des.api.numbers import show
from libra_des.commands.common import dumps

FLAG_NAMES = {"topology": "--topology", "profile": "--profile"}


def register(subs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subs.add_parser("import", help="run an imported trace (Chakra ET) on a modelled fabric")
    p.set_defaults(flag_names=FLAG_NAMES)
    kinds = p.add_subparsers(dest="format", required=True, parser_class=type(p))
    ch = kinds.add_parser("chakra", help="Chakra execution traces, one .et file per rank")
    ch.add_argument("traces", nargs="+", metavar="ET", help=".et files or folders of them")
    ch.add_argument("--topology", default="h200-roce-railopt", help="topology name or file")
    ch.add_argument("--profile", default=None, help="profile (default: the shipped H200 SXM)")
    ch.add_argument("--profile-scope", default="own", choices=("own", "borrowed"),
                    help="borrowed: use a profile measured on another GPU (with a warning)")
    ch.add_argument("--json", action="store_true", help="print the totals as JSON")
    ch.set_defaults(handler=handle_chakra)


def handle_chakra(args: argparse.Namespace) -> int:
    from rich.table import Table

    from libra_des.api.chakra import replay_chakra
    from libra_des.commands.tables import print_table

    replayed = replay_chakra([Path(t) for t in args.traces], args.topology, args.profile,
                             args.profile_scope)
    result = replayed.totals
    if args.json:
        print(dumps(result))
        return 0
    table = Table(title=f"{replayed.ranks} ranks on {replayed.topology}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("simulated step", show(result["step_s"], "step_s"))
    table.add_row("compute, all ranks", show(result["compute_s"], "compute_s"))
    table.add_row("collectives, all ranks", show(result["comm_s"], "comm_s"))
    for op, nbytes in result["collective_bytes"].items():
        table.add_row(f"{op} bytes", show(float(nbytes), "bytes"))
    table.add_row("point-to-point bytes", show(float(result["p2p_bytes"]), "bytes"))
    print_table(table)
    return 0
