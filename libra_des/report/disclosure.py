"""What a reader must know before trusting a page's numbers, shown under its headline.

* the scenario summary: cluster, model, parallelism, fidelity, seeds and steps (of the first
  run or point; the others differ only as their names or overrides say);
* a notices box per run (per sweep point): the result's ``warnings`` (a borrowed profile, a
  fast-fidelity disagreement), an OOM, a borrowed profile, the ops priced on datasheet
  numbers, ops outside their profiled range, the fidelity, and a one-seed run's caveat;
* the spread over seeds (``seeds`` in ``result.json``: ``run --seeds N``) and, for a pair of
  policies, the speed-up's paired interval;
* the model-uncertainty band (``model_uncertainty``: :mod:`libra_des.results.uncertainty`).

Everything is read from the result files; this module draws nothing.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from libra_des.errors import InputError
from libra_des.report.headline import lookup
from libra_des.report.numbers import show, sig3, with_unit
from libra_des.results.spread import show_spread

STYLE = """
.notices{border:2px solid #D55E00;background:#fff6ef;padding:.5em 1em;margin:1em 0}
.notices h3{margin:.2em 0;font-size:1em}.notices ul{margin:.2em 0}
.clean{border:1px solid #009E73;padding:.3em 1em;margin:1em 0}
.oom{color:#fff;background:#D55E00;padding:0 .4em;font-weight:bold}
"""


def esc(value: Any) -> str:
    return html.escape(str(value))


def summary_rows(result: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, value) of the scenario summary at the page's top."""
    sc = result.get("scenario") or {}
    par = sc.get("parallelism") or {}
    topo = sc.get("topology")
    layout = result.get("fabric_layout") or {}
    cluster = (f"{topo if isinstance(topo, str) else 'inline topology'}, "
               f"{result.get('gpus', par.get('gpus', '?'))} GPUs"
               + (f" on {layout['nodes']} nodes" if layout.get("nodes") else ""))
    parallel = ", ".join(f"{k} {v}" for k, v in par.items()) or "n/a"
    seeds = result.get("seeds")
    seed_text = (f"{seeds['count']} seeds from seed {sc.get('seed', 0)}"
                 if isinstance(seeds, Mapping) else f"1 seed ({sc.get('seed', 0)})")
    profile = sc.get("profile") or "h200-sxm (default)"
    scope = sc.get("profile_scope", "own")
    return [
        ("kind", str(result.get("kind", "?"))),
        ("cluster", cluster),
        ("model", str((sc.get("model") or {}).get("name", "?"))),
        ("policy", str(result.get("policy", (sc.get("balancer") or {}).get("policy", "?")))),
        ("parallelism", parallel),
        ("fidelity", str(sc.get("fidelity", "?"))),
        ("profile", f"{profile if isinstance(profile, str) else 'inline'} ({scope})"),
        ("seeds", seed_text),
        ("steps", str(sc.get("steps", "n/a"))),
    ]


def summary_section(results: Mapping[str, Mapping[str, Any]], kind: str) -> str:
    first = next(iter(results.values()), None)
    if first is None:
        return "<p class=muted>No result to summarise.</p>"
    rows = "".join(f"<tr><th class=l>{esc(k)}</th><td class=l>{esc(v)}</td></tr>"
                   for k, v in summary_rows(first))
    note = "" if kind == "run" else ("<p class=muted>Of the first run/point; the others differ "
                                     "only as their names or overrides say.</p>")
    return f"<table class=summary>{rows}</table>{note}"


def notices(result: Mapping[str, Any]) -> list[str]:
    """Everything about one result a reader must know, as sentences (HTML-escaped)."""
    sc = result.get("scenario") or {}
    out = [f"warning: {esc(w)}" for w in result.get("warnings") or []]
    out += [f"note: {esc(n)}" for n in result.get("notes") or []]
    if result.get("oom"):
        peaks = result.get("peak_memory_gib") or []
        peak = " / ".join(sig3(x) for x in peaks if isinstance(x, int | float)) or "?"
        cap = lookup(result, "memory.capacity_gib")
        out.append(f"<span class=oom>OOM</span> the run does not fit in GPU memory (peak "
                   f"{esc(peak)} GiB per stage, capacity {esc(show(cap) if cap else '?')} "
                   "GiB); memory.check let it run on")
    if sc.get("profile_scope") == "borrowed":
        out.append(f"borrowed profile: {esc(sc.get('profile'))} was measured on another GPU "
                   "than the topology's; its numbers stand in for this one's")
    datasheet = result.get("uncalibrated_ops") or []
    if datasheet:
        out.append("priced on datasheet numbers (no measurement): " + esc(", ".join(datasheet)))
    band = result.get("model_uncertainty") or {}
    if band.get("datasheet_share"):
        out.append(f"{with_unit(band['datasheet_share'], 'share')} of the time is priced at the "
                   "datasheet "
                   "(or assumed) tier: the uncertainty band does not cover it")
    out += [f"outside the profiled range: {esc(x)}" for x in band.get("outside_profiled_range")
            or []]
    note = fidelity_note(sc.get("fidelity"))
    if note:
        out.append(f"fidelity {esc(str(sc.get('fidelity')))}: {note}")
    if "seeds" not in result:
        steps = sc.get("steps")
        out.append(f"one seed{f', {steps} step(s)' if steps else ''}: no spread is shown; "
                   "rerun with --seeds N for mean and spread")
    return out


def fidelity_note(name: Any) -> str:
    """The network model's own note on its fidelity (its registration), if it has one."""
    from libra_des.sim.network import models as network_models

    try:
        return network_models.get(str(name)).note if name is not None else ""
    except InputError:  # a result of a model not registered here
        return ""


def notices_section(results: Mapping[str, Mapping[str, Any]]) -> str:
    """One box per run or sweep point with something to say (all of them, none hidden)."""
    parts = []
    for name, result in results.items():
        items = notices(result)
        if items:
            lis = "".join(f"<li>{x}</li>" for x in items)
            parts.append(f"<div class=notices><h3>Read before the numbers: {esc(name)}</h3>"
                         f"<ul>{lis}</ul></div>")
        else:
            parts.append(f"<div class=clean>{esc(name)}: no warning.</div>")
    return "".join(parts)


def seeds_section(results: Mapping[str, Mapping[str, Any]]) -> str:
    """Each headline metric's mean ± std (min, max; seeds, steps), per run with seeds."""
    parts = []
    for name, result in results.items():
        section = result.get("seeds")
        if not isinstance(section, Mapping):
            continue
        rows = "".join(f"<tr><td class=l>{esc(m)}</td><td>"
                       f"{esc(show_spread(s, section['count'], section['steps']))}</td></tr>"
                       for m, s in section.get("metrics", {}).items())
        parts.append(f"<p><b>{esc(name)}</b>: seeds {esc(section.get('seeds'))}</p>"
                     f"<table><thead><tr><th class=l>metric</th><th>mean ± std (min, max; "
                     f"seeds, steps)</th></tr></thead><tbody>{rows}</tbody></table>")
        up = section.get("speedup")
        if isinstance(up, Mapping) and up.get("interval"):
            low, high = up["interval"]
            parts.append(f"<p>Speed-up over {esc(up['over'])} ({esc(up['metric'])}, paired "
                         f"per seed): <b>{with_unit(up['mean'], 'x')} ± {sig3(up['std'])}</b>, "
                         f"interval {sig3(low)}-{with_unit(high, 'x')} ({esc(up['method'])}).</p>")
    return "".join(parts) or ("<p class=muted>One seed per run: no spread. "
                              "<code>libra-des run --seeds N</code> gives one.</p>")


def pct(percent: float) -> str:
    """A number of per cent as the page writes shares (``4.20 %``)."""
    return with_unit(percent / 100, "share")


def band_rows(band: Mapping[str, Any]) -> list[Sequence[str]]:
    return [(str(b["bucket"]), ", ".join(b.get("ops") or []), str(b["tier"]),
             with_unit(b["share"], "share"), "-" if b.get("error_pct") is None else
             pct(b["error_pct"])) for b in band.get("buckets") or []]


def band_section(results: Mapping[str, Mapping[str, Any]], sweep: bool) -> str:
    """Per run (a sweep: its first point): the band, the shares by tier, the buckets."""
    parts = []
    for name, result in results.items():
        band = result.get("model_uncertainty")
        if not isinstance(band, Mapping):
            parts.append(f"<p>{esc(name)}: <i>not recorded</i> in this result.json.</p>")
            continue
        rows = "".join("<tr>" + "".join(f"<td class=l>{esc(c)}</td>" for c in r) + "</tr>"
                       for r in band_rows(band))
        parts.append(
            f"<p><b>{esc(name)}</b>: model band ±{pct(band['band_pct_correlated'])} (errors "
            f"fully correlated, a bound) / ±{pct(band['band_pct_independent'])} (independent) "
            f"over the measured {pct(100 * band['covered_share'])} of the time; "
            f"{pct(100 * band['datasheet_share'])} at the datasheet tier, "
            f"{pct(100 * band['borrowed_share'])} borrowed (not covered)"
            f"{'; a borrowed profile: a lower bound' if band.get('borrowed_profile') else ''}"
            f".</p><table><thead><tr><th class=l>bucket</th><th class=l>ops</th>"
            f"<th class=l>tier</th><th class=l>share</th><th class=l>p90 CV error</th></tr>"
            f"</thead><tbody>{rows}</tbody></table>")
        if sweep:
            parts.append("<p class=muted>(first point shown)</p>")
            break
    rule = next((r["model_uncertainty"].get("rule") for r in results.values()
                 if isinstance(r.get("model_uncertainty"), Mapping)), None)
    if rule:
        parts.append(f"<p class=muted>Rule: {esc(rule)}.</p>")
    return "".join(parts)
