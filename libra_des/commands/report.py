"""``libra-des report RUN_OR_SWEEP_DIR --out report.html``: one self-contained HTML page."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from libra_des.base.storage import write_atomic
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
                   help="YAML list of published values {metric, value, source}")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from libra_des.config.validation import check_output_file
    from libra_des.report import render

    folder = Path(args.folder)
    out = Path(args.out) if args.out else folder / "report.html"
    check_output_file(out, "--out")  # before any reading or drawing
    inputs = {Path(args.reference).resolve()} if args.reference else set()
    if out.is_file() and (out.suffix == ".json" or out.resolve() in inputs):
        raise InputError("--out", str(out), "a new or HTML file (this one is an input)")
    err = Console(stderr=True)
    with err.status("rendering report ..."):
        page = render(folder, Path(args.reference) if args.reference else None)
    write_atomic(out, page)
    err.print(f"report: {out} ({len(page) / 1e6:.2f} MB)", highlight=False)
    return 0
