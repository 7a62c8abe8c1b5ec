"""Terminal tables that fit the terminal: an 80-column one too.

rich shrinks a table too wide for its console by cutting cells to ``…``; a table here instead
drops the columns a reader can spare first (their headers named lowest priority first, e.g.
a sweep point's id hash: sweep.json keeps it) while the table is wider than the console, and
folds what is still too wide onto more lines, so no cell is ever only ``…``. Pipes get rich's
width (``COLUMNS``, else 80) or, for the wide tables, the width their command names."""

from __future__ import annotations

import os
from collections.abc import Sequence

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

__all__ = ["fit", "print_table"]


def fit(table: Table, console: Console, spare: Sequence[str] = ()) -> Table:
    """``table`` within ``console``'s width: columns headed by ``spare`` dropped in order
    while it is too wide, every column folding (wrapping) instead of cutting with ``…``."""
    for column in table.columns:
        column.overflow = "fold"
    for header in spare:
        if width(table, console) <= console.width:
            break
        table.columns[:] = [c for c in table.columns if c.header != header]
    return table


def width(table: Table, console: Console) -> int:
    """The table's natural width (every cell on one line)."""
    return Measurement.get(console, console.options.update_width(1 << 20), table).maximum


def print_table(table: Table, spare: Sequence[str] = (), console: Console | None = None,
                pipe_width: int | None = None) -> None:
    """Print ``table`` fitted to ``console`` (stdout's by default). Into a pipe or file (no
    terminal, no ``COLUMNS``) a wide table may take ``pipe_width`` columns: a log or a grep
    reads its rows whole."""
    out = console or Console()
    if pipe_width and not out.is_terminal and "COLUMNS" not in os.environ:
        out = Console(width=pipe_width)
    out.print(fit(table, out, spare))
