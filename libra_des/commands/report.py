"""``libra-des report RUN_OR_SWEEP_DIR --out report.html``: one self-contained HTML page.

This command decides what the page's figures are (:func:`draw_figures`, by the results'
scenario kind) and passes them to :func:`libra_des.report.render`, which draws nothing.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from libra_des.api import write_atomic
from libra_des.errors import InputError

if TYPE_CHECKING:
    from libra_des.api import Drawer, Png, Source


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


def draw_figures(src: Source) -> Sequence[Png]:
    """Every report figure that applies (none for an empty input).

    A sweep gets lines along each axis (and a heatmap of two axes) per headline metric of its
    kind (the first four); runs of
    several scenario kinds get the figures of the first run's kind over the runs of that kind.
    """
    from libra_des.api import DRAWINGS, of_result, sweep_figures

    if not src.results:
        return []
    kind = of_result(next(iter(src.results.values())))
    if src.kind == "sweep":
        metrics = [m for m in kind.metrics if m in src.rows[0]][:4]
        return sweep_figures(src.rows, src.axis_keys, metrics)
    same = {name: r for name, r in src.results.items() if of_result(r) is kind}
    return DRAWINGS[kind.name](same)


def drawer() -> Drawer | None:
    """:func:`draw_figures`, or None when matplotlib (the optional figs extra) is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return None
    return draw_figures


def handle(args: argparse.Namespace) -> int:
    from libra_des.api import check_output_file, check_report_path, render

    folder = Path(args.folder)
    out = Path(args.out) if args.out else folder / "report.html"
    check_output_file(out, "--out")  # before any reading or drawing
    inputs = {Path(args.reference).resolve()} if args.reference else set()
    if out.is_file() and (out.suffix == ".json" or out.resolve() in inputs):
        raise InputError("--out", str(out), "a new or HTML file (this one is an input)")
    check_report_path(out)
    err = Console(stderr=True)
    with err.status("rendering report ..."):
        page = render(folder, Path(args.reference) if args.reference else None, drawer())
    write_atomic(out, page)
    err.print(f"report: {out} ({len(page) / 1e6:.2f} MB)", highlight=False)
    return 0
