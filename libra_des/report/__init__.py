"""One self-contained HTML report of a run, a set of runs, or a sweep (no network needed).

Input folders:

* a run: ``DIR/result.json``;
* runs side by side: ``DIR/*/result.json`` (``libra-des quickstart --out DIR`` writes these);
* a sweep: ``DIR/sweep.json`` with its ``points/``.

The page holds the resolved scenario (every field, defaults included), the headline metrics
with their definitions and each run's speed-up over its baseline (:mod:`.headline`), every
number rounded with its unit (:mod:`.numbers`; the HTML from Jinja2 templates, :mod:`.pages`),
for a paper scenario the "simulated against published" table from ``docs/references/``
(:mod:`.published`), figures (PNG, base64-inlined; drawn only when matplotlib is present),
where each cost came from (``comm_tiers`` per collective or ``cost_sources`` per MoE stage in
``result.json``: measured, borrowed, datasheet or assumed; "not recorded" when a result has
neither; plus the profile's constants with their sources), a sortable table for a
sweep, and an optional "simulated against reference" table from a YAML file of published
values::

    - metric: tokens_per_s        # dotted path into result.json
      value: 1.2e6
      source: "Libra paper, Fig. 7"
      run: libra                  # optional: which run (sub-folder) or sweep point id
      where: {balancer.policy: libra}   # optional, sweeps: the point whose overrides match

Figures are passed in, already drawn: the caller (the ``report`` command) decides what to draw
(:mod:`libra_des.report.figures`, which needs matplotlib) and hands :func:`render` a callable
from the loaded :class:`Source` to images; this module draws nothing and imports no plotting.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml

from libra_des.base.identity import code_fingerprint
from libra_des.base.version import __version__
from libra_des.errors import InputError
from libra_des.report import disclosure, headline, pages, published
from libra_des.report.headline import lookup
from libra_des.report.numbers import show, with_unit
from libra_des.results.tables import cell, read_result, sweep_points, sweep_rows

#: Headline metrics and their definitions, in words (see ``libra_des/results/metrics.py``).
DEFINITIONS: dict[str, tuple[str, str]] = {
    "step_time_s.mean": ("step time (s)", "wall time of one training step, mean over steps"),
    "tokens_per_s": ("throughput (tokens/s)", "real (unpadded) tokens trained per second"),
    "mfu": ("MFU", "model FLOPs per second over the GPUs' dense bf16 peak"),
    "bubble_fraction": ("pipeline bubble", "idle time inside each stage's pipeline span, "
                        "over the span"),
    "dp_straggler_fraction": ("DP straggler wait", "wait at gradient sync for the slowest "
                              "replica, over step time"),
    "pool_wait_fraction": ("pool wait", "per-GPU wait for slower workers of its pool or CP "
                           "group, over step time"),
    "comm_exposed_fraction": ("exposed communication", "communication on the critical path, "
                              "over step time"),
    "comm_hidden_fraction": ("hidden communication", "communication overlapped with compute, "
                             "over step time"),
    "attention_straggler_s.mean": ("attention straggler (s)", "slowest worker per forward "
                                   "attention call, mean over the window"),
    "attention_straggler_s.max": ("attention straggler max (s)", "the same, worst call"),
    "moe_layer_s": ("MoE layer time (s)", "critical-path time of one MoE layer, mean"),
    "prefill_tokens_per_s": ("prefill throughput (tokens/s)", "prompt tokens prefilled per "
                             "second"),
    "ttft_s.mean": ("time to first token (s)", "mean over requests"),
    "imbalance_ratio.mean": ("EP imbalance ratio", "max GPU expert load over mean, mean over "
                             "layers (1 = balanced)"),
    "replica_waste_fraction": ("replica waste", "share of expert replicas that computed "
                               "nothing"),
}
@dataclass(frozen=True)
class Source:
    """What a report shows: named results (runs or sweep points) and, for a sweep, its rows."""

    folder: Path
    kind: str  # "run", "runs" or "sweep"
    results: dict[str, dict[str, Any]]
    rows: list[dict[str, Any]]
    axes: tuple[str, ...] = ()  # a sweep's override keys
    #: a sweep's axes as sweep.json lists them: the keys of each (a --zip axis has several)
    axis_keys: tuple[tuple[str, ...], ...] = ()


#: Keys of a result the page reads beyond the metrics, with the JSON type each must have.
SHAPES: dict[str, tuple[type, ...]] = {
    "scenario": (dict,), "comm_tiers": (dict,), "cost_sources": (dict,),
    "uncalibrated_ops": (list,), "scenario.profile": (str,),
}


def read_json(path: Path, plausible: bool = True) -> dict[str, Any]:
    """A result file read strictly (see :func:`libra_des.results.tables.read_result`); the keys the
    page reads (:data:`SHAPES`) have their types, or are absent (null)."""
    data = read_result(path, "report", plausible)
    if plausible:
        for key, kinds in SHAPES.items():
            value = lookup(data, key)
            if value is not None and not isinstance(value, kinds):
                raise InputError(f"report: {path}", f"{key}={value}",
                                 f"{key} of type {kinds[0].__name__}")
        check_metric_types(data, path)
    return data


def check_metric_types(data: dict[str, Any], path: Path) -> None:
    """Each headline metric of the result's kind, where present, is a number (``"mfu":
    "high"`` would otherwise print as a metric)."""
    import libra_des.kinds as kinds

    if not isinstance(data.get("kind"), str):
        return  # the page refuses a result without a kind where it needs one
    try:
        metrics = kinds.of_result(data).metrics
    except InputError:
        raise InputError(f"report: {path}", data.get("kind"), "a result of a known kind") from None
    for dotted in metrics:
        value = lookup(data, dotted)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise InputError(f"report: {path}", f"{dotted}={value}", f"a number for {dotted}")


def load_source(folder: Path) -> Source:
    """Recognise a run, a folder of runs, or a sweep (bad input: one line, before any work)."""
    if (folder / "sweep.json").is_file():
        points = sweep_points(folder)
        results = {p["id"]: read_json(folder / p["file"]) for p in points
                   if not p.get("error") and (folder / p["file"]).is_file()}
        groups = tuple(tuple(k for k in axis["keys"] if isinstance(k, str))
                       for axis in read_json(folder / "sweep.json", False).get("axes") or []
                       if isinstance(axis, dict) and isinstance(axis.get("keys"), list))
        groups = tuple(g for g in groups if g)
        axes = tuple(k for g in groups for k in g)
        return Source(folder, "sweep", results, sweep_rows(folder), axes, groups)
    if (folder / "result.json").is_file():
        return Source(folder, "run", {folder.name: read_json(folder / "result.json")}, [])
    runs = sorted(p.parent for p in folder.glob("*/result.json"))
    if runs:
        return Source(folder, "runs", {p.name: read_json(p / "result.json") for p in runs}, [])
    raise InputError("RUN_OR_SWEEP_DIR", str(folder),
                     "a folder with result.json, */result.json or sweep.json")


def text(value: Any) -> str:
    """A cell's text: numbers to three significant digits (:func:`numbers.show`)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return show(value)
    return str(cell(value))


def fmt(value: Any) -> str:
    """A cell's text, escaped for HTML written outside the templates."""
    return html.escape(text(value))


class Sorted(tuple[str, float]):
    """A shown cell with the raw number a sortable column sorts by."""


def td(value: Any, left: bool) -> pages.Cell:
    """One cell as the table template writes it (a :class:`Sorted` one with its raw number)."""
    if isinstance(value, Sorted):
        return pages.Cell(value[0], left, repr(value[1]))
    return pages.Cell(text(value), left)


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], sortable: bool = False,
          left: int = 1) -> str:
    """An HTML table; the first ``left`` columns are left-aligned (names)."""
    cells = [[td(v, i < left) for i, v in enumerate(r)] for r in rows]
    return pages.table(header, cells, sortable, left)


def shown(value: Any, dotted: str) -> Any:
    """A number shown in its unit, sortable by its raw value; anything else as it is."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return Sorted((show(value, dotted), float(value)))
    return value


def kind_name(src: Source) -> str:
    """The scenario kind of the first result ("" for none or an unknown one)."""
    import libra_des.kinds as kinds

    first = next(iter(src.results.values()), None)
    try:
        return kinds.of_result(first).name if first else ""
    except InputError:
        return ""


def speedups(src: Source) -> headline.Speedups | None:
    kind = kind_name(src)
    if src.kind == "sweep":
        return headline.of_sweep(kind, src.rows, src.axes)
    return headline.of_runs(kind, src.results)


def speedup_lead(src: Source, ups: headline.Speedups | None) -> str:
    """The sentence the terminal prints, per run: its speed-up over the baseline."""
    if ups is None:
        why = ("a single run has no baseline" if src.kind == "run" else
               "the sweep does not vary balancer.policy" if src.kind == "sweep" else
               "these runs have no speed-up metric")
        return f"<p class=muted>No speed-up: {html.escape(why)}.</p>"
    if not ups.values:
        return f"<p class=muted>No speed-up: {html.escape(ups.note)}.</p>"
    if src.kind == "sweep":
        return (f"<p><b>{html.escape(ups.label)}</b> per point: see the speed-up column "
                "(each point against the baseline point with the same other-axis values)."
                "</p>")
    lines = "".join(f"<li><b>{html.escape(n)}</b>: {html.escape(ups.label)} "
                    f"<b>{html.escape(show(v, unit='x'))}</b></li>"
                    for n, v in ups.values.items() if abs(v - 1) > 0 or len(ups.values) == 1)
    note = f"<p class=muted>{html.escape(ups.note)}.</p>" if ups.note else ""
    return f"<ul class=lead>{lines}</ul>{note}"


def metrics_section(src: Source) -> str:
    names = list(src.results)
    keys = [k for k in DEFINITIONS if any(lookup(r, k) is not None for r in src.results.values())]
    ups = speedups(src)
    lead = speedup_lead(src, ups)
    if src.kind == "sweep":
        return lead + sweep_headline(src, keys, ups) + (
            "<p>Definitions:</p>" + table(["metric", "definition"], [
                (DEFINITIONS[k][0] + f" [{k}]", DEFINITIONS[k][1]) for k in keys], left=2))
    rows: list[tuple[Any, ...]] = [
        (DEFINITIONS[k][0], DEFINITIONS[k][1], *(show(lookup(src.results[n], k), k)
                                                 for n in names)) for k in keys]
    if ups is not None and ups.values:
        rows.insert(0, (ups.label, "the baseline's time over this run's (as the terminal "
                        "prints it)", *(show(ups.values[n], unit="x") if n in ups.values
                                        else "n/a" for n in names)))
    return lead + table(["metric", "definition", *names], rows, left=2)


def sweep_headline(src: Source, keys: Sequence[str], ups: headline.Speedups | None) -> str:
    """One row per point: its axis values, the headline metrics rounded, its speed-up."""
    # The speed-up right after the axes: the column a reader looks for stays on screen.
    cols = [k for k in keys if any(k in r for r in src.rows)]
    header = [*src.axes]
    if ups is not None and ups.values:
        header.append(ups.label)
    header += [DEFINITIONS[k][0] for k in cols]
    body = []
    for r in src.rows:
        line: list[Any] = [*(r.get(a, "") for a in src.axes)]
        if ups is not None and ups.values:
            v = ups.values.get(str(r["id"]))
            line.append(Sorted((show(v, unit="x"), v)) if v is not None else "n/a")
        body.append([*line, *(shown(r.get(k), k) for k in cols)])
    return table(header, body, sortable=True, left=len(src.axes))


def scenario_section(src: Source) -> str:
    first = next(iter(src.results.values()), {})
    scenario = first.get("scenario", {})
    text = yaml.safe_dump(scenario, sort_keys=True, default_flow_style=False)
    note = "" if src.kind == "run" else (
        " (of the first run/point; the others differ only as their names or overrides say)")
    return (f"<p>Every field as simulated, defaults included{note}.</p>"
            f"<pre>{html.escape(text)}</pre>")


def profile_rows(ref: Any) -> list[tuple[str, Any, str]]:
    """The profile's kernel and fabric constants and collective fits, each with its source."""
    from libra_des.hardware.profiles.profile import DEFAULT_PROFILE, resolve_profile

    try:
        data = read_json(resolve_profile(ref or DEFAULT_PROFILE), plausible=False)
    except InputError:
        return []
    rows = []
    for section in ("peaks", "kernels", "interconnect"):
        for key, entry in sorted((data.get(section) or {}).items()):
            if isinstance(entry, Mapping) and "value" in entry:
                rows.append((f"{section}.{key}", show(entry["value"], f"{section}.{key}"),
                             str(entry.get("source", "not recorded"))))
    for fit in data.get("fits") or []:
        rows.append((f"fit {fit.get('op')} x{fit.get('group')}", str(fit.get("model", "")),
                     f"fitted to {fit.get('n', '?')} measured sizes "
                     f"({data.get('software', {}).get('collectives', 'source not recorded')})"))
    return rows


def costs_section(src: Source) -> str:
    """Per op: measured / borrowed / datasheet, from ``comm_tiers`` when the result has it."""
    parts = []
    for name, result in src.results.items():
        # comm_tiers: per collective (training); cost_sources: per MoE stage.
        tiers = {**(result.get("comm_tiers") or {}), **(result.get("cost_sources") or {})}
        profile = lookup(result, "scenario.profile") or "h200-sxm (default)"
        head = f"<p><b>{html.escape(name)}</b>: kernel costs from profile {fmt(profile)}"
        if not tiers:
            parts.append(head + "; communication cost sources: <i>not recorded</i> in this "
                         "result.json.</p>")
            continue
        rows = sorted((op, str(tier)) for op, tier in tiers.items())
        uncal = result.get("uncalibrated_ops") or []
        parts.append(head + f"; {len(uncal)} uncalibrated op(s).</p>"
                     + table(["op", "cost from"], rows, left=2))
        if src.kind == "sweep":
            parts.append("<p class=muted>(first point shown)</p>")
            break
    first = next(iter(src.results.values()), {})
    constants = profile_rows(lookup(first, "scenario.profile"))
    if constants:
        parts.append("<p>Profile constants and fits, with their sources:</p>"
                     + table(["parameter", "value", "source"], constants, left=3))
    return "".join(parts)


def sweep_section(src: Source) -> str:
    header = list(dict.fromkeys(k for row in src.rows for k in row))
    body = [[shown(row.get(k, ""), k) for k in header] for row in src.rows]
    return ("<p>Click a column title to sort.</p>"
            + table(header, body, sortable=True, left=1))


class Image(Protocol):
    """One drawn figure as the page inlines it."""

    @property
    def caption(self) -> str: ...

    @property
    def png_base64(self) -> str: ...


#: What draws a page's figures: the loaded source in, finished images out.
Drawer = Callable[[Source], Sequence[Image]]
#: The note in place of figures when no drawer is given (matplotlib, the figs extra, missing).
NO_DRAWER = "Figures need matplotlib: pip install 'libra-des[figs]'."


def figures_section(src: Source, draw: Drawer | None) -> str:
    if draw is None:
        return f"<p class=muted>{html.escape(NO_DRAWER)}</p>"
    figs = draw(src)
    if not figs:
        return "<p class=muted>No figure applies to these results.</p>"
    return "".join(f'<figure><img alt="{html.escape(f.caption)}" src="data:image/png;base64,'
                   f'{f.png_base64}"><figcaption>{html.escape(f.caption)}</figcaption></figure>'
                   for f in figs)


def papers_section(data: Mapping[str, Any], rows: Sequence[Sequence[Any]]) -> str:
    """The built-in table of one paper experiment (docs/references/), or why it has none."""
    what = html.escape(str(data.get("experiment", "")))
    note = f"<p class=muted>{html.escape(str(data['note']))}</p>" if data.get("note") else ""
    if not rows:
        return f"<p>{what}: no published number to compare with.</p>{note}"
    return (f"<p>{what}. Published values shipped in docs/references/; a metric the runs "
            "lack, or a setting no run has, shows as missing.</p>"
            + table(["metric", "run / point", "simulated", "published",
                     "simulated / published", "source"], rows, left=2) + note)


def explain_section(src: Source) -> str:
    """Each explained pair of runs (``libra-des explain``'s split) as one table, or ''."""
    from libra_des.results.attribution import explain_pairs

    pairs = explain_pairs(src.results) if src.kind == "runs" else []
    out = []
    for e in pairs:
        split = e.as_dict()
        step, attn = split["step_time_s"], split["attention_straggler_s"]

        def seconds(value: float, m: Mapping[str, Any]) -> str:
            # Rounding (a part equal in both runs) shows as 0, not as a femtosecond.
            return with_unit(0.0 if abs(value) < 1e-12 * abs(m["b"]) else value, "s")

        rows = [[name.replace("_", " "), seconds(value, step),
                 seconds(attn["components"][name], attn)]
                for name, value in step["components"].items()]
        rows.append(["measured difference", with_unit(step["difference"], "s"),
                     with_unit(attn["difference"], "s")])
        out.append(f"<p>{html.escape(e.a)} minus {html.escape(e.b)}: the components add up "
                   "to the measured difference (definitions: docs/model.md).</p>"
                   + table(["component", "step time", "attention straggler"], rows, left=1))
    return "".join(out)


def render(folder: Path, reference: Path | None = None, draw: Drawer | None = None) -> str:
    """The whole page as one string; ``draw`` makes its figures (none drawn without it)."""
    src = load_source(folder)
    refs = published.reference_rows(src.kind, src.results, src.rows, reference) \
        if reference is not None else None
    labels = {str(r["id"]): ", ".join(f"{k}={r.get(k)}" for k in src.axes) or str(r["id"])
              for r in src.rows}
    papers = published.built_in(src.results, labels)
    sections = [("Scenario summary", disclosure.summary_section(src.results, src.kind)),
                ("Headline metrics", metrics_section(src)),
                ("Read before the numbers", disclosure.notices_section(src.results)),
                ("Spread over seeds", disclosure.seeds_section(src.results)),
                ("Model uncertainty", disclosure.band_section(src.results,
                                                              src.kind == "sweep"))]
    sections += [(f"Simulated against published: {name}", papers_section(data, rows))
                 for name, data, rows in papers]
    sections.append(("Figures", figures_section(src, draw)))
    why = explain_section(src)
    if why:
        sections.append(("Why one run beats another", why))
    if src.kind == "sweep":
        sections.append((f"Sweep points ({len(src.rows)})", sweep_section(src)))
    if refs is not None:
        sections.append(("Simulated against reference", table(
            ["metric", "run / point", "simulated", "reference", "relative difference",
             "source"], refs, left=2)))
    sections += [("Where each cost came from", costs_section(src)),
                 ("Scenario (resolved)", scenario_section(src))]
    title = f"libra-des report: {folder.name} ({src.kind}, {len(src.results)} result(s))"
    return pages.page(title, sections, disclosure.STYLE, version=__version__,
                      code=code_fingerprint(), folder=folder.name)
