"""``libra-des report RUN_OR_SWEEP_DIR --out report.html``: one self-contained HTML page.

The API decides what the page's figures are (:func:`libra_des.api.reports.draw_figures`, by
the results' scenario kind) and passes them to the report layer, which draws nothing.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rich.console import Console

from libra_des.api.outputs import check_output_file, check_report_path, write_atomic
from libra_des.errors import InputError


def register(subs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subs.add_parser(
        "report", help="one self-contained HTML page for a run, runs or a sweep",
        description="Render a run folder (result.json), a folder of runs (*/result.json) or a "
        "sweep folder (sweep.json) as one HTML file: metrics with definitions, figures, cost "
        "sources, the resolved scenario and, for a sweep, a sortable table.",
        epilog="examples:\n  libra-des report runs/quickstart --out report.html\n"
        "  libra-des report runs/sweep-quickstart --out sweep.html --reference published.yaml\n",
    )
    p.add_argument("folder", metavar="RUN_OR_SWEEP_DIR", help="folder to report on")
    p.add_argument("--out", default=None, help="HTML file (default FOLDER/report.html)")
    p.add_argument("--reference", default=None, metavar="FILE",
                   help="YAML list of published values {metric, value, source}; paper "
                   "scenarios need none (their values ship in docs/references/)")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from libra_des.api.reports import drawer, render

    folder = Path(args.folder)
    out = Path(args.out) if args.out else folder / "report.html"
    check_output_file(out, "--out")  # before any reading or drawing
    # realpath, not Path.resolve: a symbolic-link loop is the reader's one line, not an error.
    inputs = {os.path.realpath(args.reference)} if args.reference else set()
    if out.is_file() and (out.suffix == ".json" or os.path.realpath(out) in inputs):
        raise InputError("--out", str(out), "a new or HTML file (this one is an input)")
    check_report_path(out)
    err = Console(stderr=True)
    with err.status("rendering report ..."):
        page = render(folder, Path(args.reference) if args.reference else None, drawer())
    write_atomic(out, page)
    err.print(f"report: {out} ({len(page) / 1e6:.2f} MB)", highlight=False)
    return 0
