"""``libra-des profile``: import measurements, fit and cross-validate, show and compare.

- ``profile import --format nccl-tests|vidur-csv|attention-psv FILE... --out P.json
  [--device NAME] [--cv] [--strip-samples]``: create ``P.json`` (from the shipped datasheet
  profile of the device) or extend it, then fit. Re-importing a file replaces its samples.
  ``--strip-samples`` keeps only the fits (how the shipped profiles are made: derived numbers
  ship, measured data files do not).
- ``profile fit P [--cv] [--json]``: refit ``P``'s samples and save; ``--cv`` runs
  leave-one-size-out cross-validation and prints its errors per op and group size.
- ``profile show P`` and ``profile compare A B``: readable tables.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from libra_des.api.numbers import pct
from libra_des.api.outputs import check_output_file
from libra_des.api.profiles import (
    import_formats,
    import_measurements,
    load_profile,
    read_measurements,
    refit_profile,
)
from libra_des.commands.common import dumps
from libra_des.commands.profile_view import compare_tables, show_tables
from libra_des.commands.tables import print_table

if TYPE_CHECKING:
    from libra_des.api.profiles import FitResult

#: The profile layer's argument names -> this command's flags.
FLAG_NAMES = {"format": "--format", "path": "--out", "device": "--device"}


def register(subs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subs.add_parser("profile", help="import, fit, show and compare calibration profiles")
    p.set_defaults(flag_names=FLAG_NAMES)
    acts = p.add_subparsers(dest="action", required=True, parser_class=type(p))
    imp = acts.add_parser("import", help="import measurements into a profile and fit it")
    imp.add_argument("--format", required=True, help=" | ".join(import_formats()))
    imp.add_argument("files", nargs="+", metavar="FILE", help="measurement files")
    imp.add_argument("--out", required=True, help="profile JSON to create or extend")
    imp.add_argument("--device", default=None, help="device name (default: from the files)")
    imp.add_argument("--base", default=None, help="profile to start a new --out from "
                     "(default: the device's datasheet profile)")
    imp.add_argument("--cv", action="store_true", help="also cross-validate the fits")
    imp.add_argument("--strip-samples", action="store_true", help="keep fits, drop samples")
    imp.add_argument("--json", action="store_true", help="print the fit errors as JSON")
    imp.set_defaults(handler=handle_import)
    fit = acts.add_parser("fit", help="refit a profile's samples (and cross-validate)")
    fit.add_argument("profile", help="profile JSON (or shipped name)")
    fit.add_argument("--cv", action="store_true", help="leave-one-size-out cross-validation")
    fit.add_argument("--json", action="store_true", help='print {"ops": [...]} as JSON')
    fit.set_defaults(handler=handle_fit)
    show = acts.add_parser("show", help="print a profile as tables")
    show.add_argument("profile", help="profile JSON (or shipped name)")
    show.set_defaults(handler=handle_show)
    cmp_ = acts.add_parser("compare", help="compare two profiles side by side")
    cmp_.add_argument("a", help="first profile")
    cmp_.add_argument("b", help="second profile")
    cmp_.set_defaults(handler=handle_compare)


#: Columns an 80-column terminal drops first: the per-node width (the group says most).
SPARE = ("per node", "b / a", "kind")


def handle_import(args: argparse.Namespace) -> int:
    imported = read_measurements(args.format, [Path(f) for f in args.files])
    out = Path(args.out)
    check_output_file(out, "--out")
    if imported.skipped:
        sys.stderr.write(f"note: skipped {imported.skipped} rows without a measurement "
                         "(size 0)\n")
    results = import_measurements(imported, out, args.device, args.base, args.cv,
                                  args.strip_samples)
    report(results, args.json, f"{len(imported.samples)} samples imported into {out}")
    return 0


def handle_fit(args: argparse.Namespace) -> int:
    path, results = refit_profile(args.profile, args.cv)
    report(results, args.json, f"{len(results)} fits in {path}")
    return 0


def report(results: list[FitResult], as_json: bool, title: str) -> None:
    rows = [r.row() for r in results]
    if as_json:
        print(dumps({"ops": rows}))
        return
    table = Table(title=title)
    for col in (
        "op",
        "group",
        "per node",
        "algorithm",
        "kind",
        "median |err| %",
        "p90 |err| %",
        "n",
    ):
        table.add_column(col, justify="left" if col in ("op", "algorithm", "kind") else "right")
    for r in rows:
        table.add_row(
            str(r["op"]),
            str(r["group"]),
            str(r["gpus_per_node"]),
            str(r["algorithm"] or "-"),
            str(r["kind"]),
            pct(r["median_abs_pct_error"]),
            pct(r["p90_abs_pct_error"]),
            str(r["n"]),
        )
    print_table(table, SPARE, pipe_width=140)


def handle_show(args: argparse.Namespace) -> int:
    out = Console()
    for table in show_tables(load_profile(args.profile)):
        print_table(table, SPARE, out, 140)
    return 0


def handle_compare(args: argparse.Namespace) -> int:
    out = Console()
    for table in compare_tables(load_profile(args.a), load_profile(args.b)):
        print_table(table, SPARE, out, 140)
    return 0
