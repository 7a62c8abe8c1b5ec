"""``libra-des figs [--quick] [--only NAME] --out DIR``: draw the paper-style figures.

The figures are ``paper_figs``'s (one module per figure, found through ``paper_figs.catalog``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from libra_des.api.outputs import check_output_dir, dumps, write_atomic
from libra_des.api.sweeps import default_workers
from libra_des.commands.common import int_list
from libra_des.errors import InputError

MISSING = "error: figs: matplotlib is not installed; allowed: pip install 'libra-des[figs]'\n"


def register(subs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subs.add_parser(
        "figs", help="draw every paper-style figure (PNG, PDF and CSV each)",
        description="Draw the paper-style figures from resumable sweeps. Each figure is "
        "written as NAME.png, NAME.pdf and NAME.csv (the plotted numbers); data goes to "
        "OUT/data/ so a rerun only draws.",
        epilog="examples:\n  libra-des figs --quick --out figs\n"
        "  libra-des figs --only dp_scaling,moe_breakdown --out figs   # full mode, 3 seeds\n",
    )
    p.add_argument("--out", default="figs", help="output folder (figs)")
    p.add_argument("--quick", action="store_true",
                   help="one seed, fewer steps and points (minutes instead of hours)")
    p.add_argument("--only", default=None, metavar="NAME[,NAME]",
                   help="draw only these figures (see --list)")
    p.add_argument("--list", action="store_true", help="list the figures and exit")
    p.add_argument("--workers", default=None,
                   help=f"local worker processes per sweep (default {default_workers()})")
    p.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # tests only
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    try:
        import matplotlib  # noqa: F401  (the optional extra: checked before any work)
    except ImportError:
        sys.stderr.write(MISSING)
        return 2
    # The figures live in the top-level package paper_figs (installed beside libra_des); this
    # is the one place libra_des imports it, lazily, only when ``figs`` runs.
    from paper_figs import catalog
    from paper_figs.common import FigOptions

    if args.list:
        for entry in catalog.FIGURES:
            print(f"{entry.name:20s} {entry.title}")
        return 0
    # ``--only ""`` names no figure: an error, not "every figure" (hours in full mode).
    names = args.only.split(",") if args.only is not None else list(catalog.NAMES)
    for name in names:
        if name not in catalog.NAMES:
            raise InputError("--only", name, ", ".join(catalog.NAMES))
    workers_list = int_list("--workers", args.workers or str(default_workers()))
    if len(workers_list) != 1:
        raise InputError("--workers", args.workers, "a single integer >= 1")
    workers = workers_list[0]
    # Every figure's PNG, PDF and CSV is replaced: each must be the tool's own, unchanged.
    check_output_dir(Path(args.out), "--out", ("figures.json",), ("*.png", "*.pdf", "*.csv"))
    data = Path(args.out) / "data"  # the figures' sweeps, each checked by its own sweep
    if data.exists() and not data.is_dir():
        raise InputError("--out", str(data), "a folder for the figures' data (this is a file)")
    opts = FigOptions(Path(args.out), quick=args.quick, workers=workers, tiny=args.tiny)
    entries = [e for e in catalog.FIGURES if e.name in names]
    err = Console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/"
               "{task.total}"), TimeElapsedColumn())
    with Progress(*columns, console=err, disable=not err.is_terminal) as bar:
        task = bar.add_task(f"figures ({opts.mode} mode)", total=len(entries))

        def done(o: catalog.Outcome) -> None:
            bar.advance(task)
            status = "ok" if o.drawn else "FAILED"
            bar.console.print(f"{o.name}: {status} ({o.seconds:.1f} s)", highlight=False)

        outcomes = catalog.draw(entries, opts, done)
    index = [{"name": o.name, "title": o.drawn.title, "caption": o.drawn.caption,
              "files": [f.name for f in o.drawn.files]} for o in outcomes if o.drawn]
    write_atomic(opts.out / "figures.json", dumps({"mode": opts.mode, "figures": index}) + "\n")
    failed = [o for o in outcomes if not o.drawn]
    err.print(f"figs: {len(index)}/{len(outcomes)} figures -> {opts.out}", highlight=False)
    for o in failed:
        sys.stderr.write(f"error: figure {o.name}: {o.error}\n")
    return 1 if failed else 0



