"""``libra-des validate PROFILE [--json]``: replay a profile's measurements through the simulator.

The replay and its per-op error table are :mod:`libra_des.hardware.profiles.profile_replay`'s (the
API's :func:`~libra_des.api.profiles.validate_profile`); this command prints them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.table import Table

from libra_des.api.numbers import pct, signed_pct, with_unit
from libra_des.api.profiles import validate_profile
from libra_des.commands.common import dumps
from libra_des.commands.tables import print_table


def register(subs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subs.add_parser("validate", help="replay a profile's measurements and report the error")
    p.add_argument("profile", help="profile JSON with samples (harness or `profile import`)")
    p.add_argument("--json", action="store_true", help='print {"ops": [...]} as JSON')
    p.set_defaults(handler=handle_validate)


def handle_validate(args: argparse.Namespace) -> int:
    checked = validate_profile(Path(args.profile))
    if args.json:
        print(dumps({"ops": checked.rows}))
        return 0
    print_table(table(checked.rows, f"{checked.device}: {checked.samples} samples replayed"),
                ("per node", "kind", "dtype", "bias %"), pipe_width=180)
    return 0


def table(rows: list[dict[str, object]], title: str) -> Table:
    t = Table(title=title)
    right = ("group", "per node", "n", "median |err| %", "p90 |err| %", "worst %", "bias %")
    for col in ("op", "group", "per node", "algorithm", "dtype", "kind", *right[2:], "worst case"):
        t.add_column(col, justify="right" if col in right else "left")
    for r in rows:
        worst = r["worst_case"]
        assert isinstance(worst, dict)
        t.add_row(
            str(r["op"]),
            str(r["group"]),
            str(r["gpus_per_node"]),
            str(r["algorithm"] or "-"),
            str(r["dtype"] or "-"),
            str(r["kind"]),
            str(r["n"]),
            pct(r["median_abs_pct_error"]),
            pct(r["p90_abs_pct_error"]),
            pct(r["worst_abs_pct_error"]),
            signed_pct(r["median_signed_pct_error"]),
            f"{worst['case']}: {with_unit(worst['measured_s'], 's')}, model "
            f"{with_unit(worst['predicted_s'], 's')}",
        )
    return t
