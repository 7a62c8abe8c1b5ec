"""The HTML report (``libra-des report``, ``quickstart --out``): the page's figures chosen by
the results' kind and drawn, then handed to :mod:`libra_des.report`, which draws nothing.

matplotlib (the figs extra) and the report modules are imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from libra_des.report import Drawer as Drawer
    from libra_des.report import Source as Source
    from libra_des.report.figures import Png as Png

__all__ = ["draw_figures", "drawer", "render"]


def draw_figures(src: Source) -> Sequence[Png]:
    """Every report figure that applies (none for an empty input).

    A sweep gets lines along each axis (and a heatmap of two axes) per headline metric of its
    kind (the first four); runs of several scenario kinds get the figures of the first run's
    kind over the runs of that kind.
    """
    from libra_des.kinds import of_result
    from libra_des.report.figures import DRAWINGS
    from libra_des.report.figures import sweep as sweep_figures

    if not src.results:
        return []
    kind = of_result(next(iter(src.results.values())))
    if src.kind == "sweep":
        metrics = [m for m in kind.metrics if m in src.rows[0]][:4]
        return sweep_figures(src.rows, src.axis_keys, metrics)
    same = {name: r for name, r in src.results.items() if of_result(r) is kind}
    return [*DRAWINGS[kind.name](same), *waterfalls(same), *timelines(src)]


def timelines(src: Source) -> list[Png]:
    """A Gantt chart of one step (one MoE layer) per run whose folder holds ``trace.json``
    (``run --trace``): the same events Perfetto shows (:mod:`libra_des.report.timeline`)."""
    import json

    from libra_des.report.timeline import gantt

    out = []
    for name, result in src.results.items():
        folder = src.folder if src.kind == "run" else src.folder / name
        path = folder / "trace.json"
        if not path.is_file():
            continue
        try:
            trace = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # a damaged trace costs its chart, not the page
        png = gantt(trace, result, name) if isinstance(trace, dict) else None
        if png is not None:
            out.append(png)
    return out


def waterfalls(results: Mapping[str, Mapping[str, Any]]) -> list[Png]:
    """The step time's split of each pair the report explains (``explain_runs``)."""
    from libra_des.api.explain import explain_runs
    from libra_des.report.figures import waterfall

    return [waterfall(e.as_dict()["step_time_s"], (e.a, e.b), "step time")
            for e in explain_runs(results)]


def drawer() -> Drawer | None:
    """:func:`draw_figures`, or None when matplotlib (the optional figs extra) is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return None
    return draw_figures


def render(folder: Path, reference: Path | None = None, draw: Drawer | None = None) -> str:
    """The self-contained HTML page of a run, runs or sweep folder (``reference``: a YAML
    list of published values to set beside the simulated ones)."""
    from libra_des.report import render as page

    return page(folder, reference, draw)
