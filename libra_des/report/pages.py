"""The report's HTML from Jinja2 templates (``libra_des/report/templates/``, package data).

Autoescape is on: every text handed in is escaped by the template, and only sections the
report already rendered (:class:`markupsafe.Markup`) go in as HTML. The style and the
click-to-sort script are files beside the templates, included as they are (the page stays
self-contained: nothing is fetched when it is opened).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

__all__ = ["Cell", "Markup", "page", "table"]


@dataclass(frozen=True)
class Cell:
    """One table cell: its text, left-aligned or not, and the raw number a sortable column
    sorts by (``None``: by its text)."""

    text: str
    left: bool
    sort: str | None = None


@cache
def environment() -> Environment:
    """The templates' environment (built once; trailing newlines kept: the page ends with
    one, a table with none)."""
    # The templates folder beside this module (package data), found by path.
    folder = Path(__file__).with_name("templates")
    return Environment(loader=FileSystemLoader(folder), autoescape=True,
                       keep_trailing_newline=True, undefined=StrictUndefined)


def table(header: Sequence[str], rows: Sequence[Sequence[Cell]], sortable: bool,
          left: int) -> str:
    """An HTML table; the first ``left`` header cells are left-aligned. Plain text out (not
    :class:`Markup`): the report joins it with the HTML it writes itself, which ``Markup``
    would escape."""
    return environment().get_template("table.html.j2").render(
        header=header, rows=rows, sortable=sortable, left=left)


def page(title: str, sections: Sequence[tuple[str, str]], extra_style: str,
         **meta: Any) -> str:
    """The whole page: ``sections`` are (heading, rendered HTML) pairs; ``meta`` fills the
    line under the title (version, code fingerprint, source folder)."""
    return environment().get_template("page.html.j2").render(
        title=title, sections=[(h, Markup(s)) for h, s in sections],
        extra_style=Markup(extra_style), **meta)
