"""Checks every drawn figure must pass (the report's and ``libra-des figs``'), run on the
matplotlib figures themselves, captured before they are encoded.

* every axes with data has a title (its own or the figure's);
* no two series of one axes look alike (series: what its legend lists, else every line, bar
  group and filled step; a look: lines by colour, line style and marker, bars and areas by
  colour and hatch, so hatching or dashes may tell series of one colour apart);
* no legend box overlaps any axes' area (data area or colour bar): legends sit outside;
* heat maps use a colour map readable with colour-vision deficiency (:data:`UNIFORM_MAPS`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

#: matplotlib's perceptually uniform sequential colour maps (the report uses cividis), and
#: ColorBrewer's colour-blind-safe diverging ones (for a signed ratio around 1).
UNIFORM_MAPS = ("cividis", "viridis", "magma", "inferno", "plasma", "RdBu", "PuOr")


class Figures:
    """Every figure the report (``figures.encode``) and ``libra-des figs`` (``common.save``)
    draw, captured before it becomes a PNG."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from libra_des.report import figures
        from paper_figs import common

        self.drawn: list[tuple[Any, str]] = []
        encode, save = figures.encode, common.save

        def capture(fig: Any, caption: str) -> Any:
            self.drawn.append((fig, caption))
            return encode(fig, caption)

        def capture_save(fig: Any, opts: Any, name: str, title: str, text: str,
                         rows: Any) -> Any:
            self.drawn.append((fig, f"{name}: {text}"))
            return save(fig, opts, name, title, text, rows)

        monkeypatch.setattr(figures, "encode", capture)
        monkeypatch.setattr(common, "save", capture_save)


def look_of(handle: Any) -> tuple[str, ...]:
    """How a legend handle is told apart: a line by colour, style and marker; a bar group or
    an area by face colour and hatch."""
    from matplotlib.colors import to_hex
    from matplotlib.container import BarContainer, ErrorbarContainer
    from matplotlib.lines import Line2D

    if isinstance(handle, BarContainer):
        return look_of(handle[0])
    if isinstance(handle, ErrorbarContainer):
        return look_of(handle.lines[0])
    if isinstance(handle, Line2D):
        return ("line", to_hex(handle.get_color()), str(handle.get_linestyle()),
                str(handle.get_marker()))
    face = handle.get_facecolor()
    colour = to_hex(face[0] if getattr(face, "ndim", 1) == 2 else face)
    return ("area", colour, str(handle.get_hatch() or ""))


def series_looks(ax: Any) -> Iterator[tuple[str, ...]]:
    """One look per drawn series: the legend's entries, else lines, bar groups, steps."""
    from matplotlib.container import BarContainer
    from matplotlib.patches import StepPatch

    handles, _ = ax.get_legend_handles_labels()
    if handles:
        yield from (look_of(h) for h in handles)
        return
    yield from (look_of(line) for line in ax.get_lines())
    for container in ax.containers:
        if isinstance(container, BarContainer) and len(container):
            yield look_of(container)
    yield from (look_of(p) for p in ax.patches if isinstance(p, StepPatch))


def legend_overlaps(fig: Any) -> list[str]:
    """Each legend box that overlaps an axes' area, named by its axes' title."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    legends = [(ax, ax.get_legend()) for ax in fig.axes if ax.get_legend()]
    legends += [(None, leg) for leg in fig.legends]
    found = []
    for owner, leg in legends:
        box = leg.get_window_extent(renderer).shrunk(0.98, 0.98)  # touching is not over
        for ax in fig.axes:
            if box.overlaps(ax.get_window_extent(renderer)):
                found.append(f"legend of {owner.get_title() if owner else 'figure'!r} over "
                             f"axes {ax.get_title() or ax.get_label()!r}")
    return found


def check_figure(fig: Any, caption: str) -> None:
    data_axes = [ax for ax in fig.axes if ax.get_label() != "<colorbar>" and (
        ax.get_lines() or ax.containers or ax.images or ax.patches or ax.collections)]
    assert data_axes, caption
    titled = bool(fig.get_suptitle().strip()) if hasattr(fig, "get_suptitle") else False
    for ax in data_axes:
        assert ax.get_title().strip() or titled, f"no title: {caption}"
        looks = list(series_looks(ax))
        assert len(looks) == len(set(looks)), f"series alike in {caption}: {looks}"
        for image in ax.images:  # perceptually uniform, readable with colour-vision deficiency
            assert image.get_cmap().name in UNIFORM_MAPS, caption
    assert not legend_overlaps(fig), (legend_overlaps(fig), caption)
