"""The report's HTML comes from Jinja2 templates shipped with the package, autoescaped."""

from __future__ import annotations

from pathlib import Path

from libra_des.report import pages, table

PACKAGE = Path(__file__).resolve().parents[1] / "libra_des" / "report"


def test_text_is_escaped_and_sections_are_html() -> None:
    page = pages.page("a <b> & 'c'", [("<h>", "<p>kept</p>")], ".x{}", version="1",
                      code="f", folder="d&e")
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</html>\n")
    assert "<title>a &lt;b&gt; &amp; &#39;c&#39;</title>" in page
    assert "<h2>&lt;h&gt;</h2><p>kept</p>" in page and "source folder d&amp;e" in page
    assert "function sortBy" in page and ".x{}" in page  # the style and script inline


def test_table_cells_are_escaped_and_sortable() -> None:
    html = table(["name", "<v>"], [["<x>", 1.5]], sortable=True)
    assert html.startswith("<table><thead><tr><th class=l onclick=\"sortBy(this)\">name</th>")
    assert "<td class=l>&lt;x&gt;</td>" in html and "&lt;v&gt;" in html


def test_templates_are_package_data() -> None:
    text = (PACKAGE.parents[1] / "pyproject.toml").read_text()
    assert '"libra_des.report" = ["templates/*"]' in text
    assert {p.name for p in (PACKAGE / "templates").iterdir()} >= {
        "page.html.j2", "table.html.j2", "report.css", "sort.js"}
