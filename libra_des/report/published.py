"""Simulated against published: the report's comparison tables.

Two sources of published values:

* **built in**, for the paper scenarios (``scenarios/paper-*.yaml``): one YAML file per paper
  experiment in ``docs/references/``, named after the scenario (``paper-pool-sweep-1m.yaml``),
  found from a result's ``scenario.name``::

      scenario: paper-pool-sweep-1m
      experiment: "pool-size sweep, 1M corpus"
      values:                           # may be empty: then ``note`` says why
        - metric: attention_imbalance.inter_pool   # dotted path into result.json
          value: 0.0066                 # or range: [low, high]
          unit: "1"                     # fraction | s | tokens/s | 1 (a plain number)
          where: {balancer.policy: libra, balancer.pool_size: 8}  # resolved scenario fields
          source: {paper: "...", figure: "...", page: null, via: "..."}
      note: "..."

  A run or point is compared with an entry when every ``where`` field of its resolved
  scenario has that value; an entry no run matches, or whose metric a matching result lacks,
  is listed as missing.
* **given**, ``libra-des report --reference FILE``: a YAML list of ``{metric, value, source}``
  with optional ``run`` or ``where`` (override keys of a sweep point).

Every published number is checked as a result's numbers are
(:func:`libra_des.results.plausibility.check_numbers`): a file with an impossible value is
bad input.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from libra_des.config import ROOT, read_yaml
from libra_des.errors import InputError
from libra_des.report.headline import lookup
from libra_des.report.numbers import plausible, show, sig3
from libra_des.results.tables import cell

#: Where the built-in published values live (one file per paper scenario).
REFERENCES = ROOT / "docs" / "references"
#: A file's unit names and the report unit each must agree with (``numbers.unit_of``).
UNITS = {"fraction": "share", "s": "s", "tokens/s": "tokens/s", "1": ""}
ENTRY_KEYS = {"metric", "value", "range", "unit", "where", "source", "note"}
SOURCE_KEYS = {"paper", "figure", "page", "via"}
#: Keys of one ``--reference`` entry (a key outside them would be silently ignored).
REFERENCE_KEYS = {"metric", "value", "source", "run", "where"}


def reference_file(name: Any) -> Path | None:
    """The built-in published values of a scenario name, when it has a file."""
    if not isinstance(name, str) or "/" in name or not name.startswith("paper-"):
        return None
    path = REFERENCES / f"{name}.yaml"
    return path if path.is_file() else None


def load_paper(path: Path) -> dict[str, Any]:
    """One built-in file, checked: the keys above, finite plausible numbers, a source each."""
    field = f"published values {path.name}"
    data = read_yaml(path, field)
    if not isinstance(data, Mapping) or not isinstance(data.get("values"), list):
        raise InputError(field, str(path), "a mapping with a list under values")
    for entry in data["values"]:
        check_entry(entry, field)
    if not data["values"] and not isinstance(data.get("note"), str):
        raise InputError(field, str(path), "values, or a note saying why there are none")
    return dict(data)


def check_entry(entry: Any, field: str) -> None:
    """One built-in entry: a metric, a value or a range (finite, plausible), a unit, a source."""
    if not isinstance(entry, Mapping) or not {"metric", "unit", "source"} <= set(entry) \
            or not set(entry) <= ENTRY_KEYS or ("value" in entry) == ("range" in entry):
        raise InputError(field, str(entry), "entries {metric, value or range, unit, source, "
                         "where, note}")
    metric = entry["metric"]
    numbers = [entry["value"]] if "value" in entry else entry["range"]
    if not isinstance(numbers, list) or len(numbers) not in (1, 2) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            and plausible(str(metric), float(v)) and v != 0 for v in numbers) \
            or numbers != sorted(numbers):
        raise InputError(f"{field} {metric}", numbers, "finite plausible non-zero numbers "
                         "(a range as [low, high])")
    if entry["unit"] not in UNITS:
        raise InputError(f"{field} {metric}.unit", entry["unit"], ", ".join(UNITS))
    source = entry["source"]
    if not isinstance(source, Mapping) or not set(source) <= SOURCE_KEYS or not all(
            isinstance(source.get(k), str) and source[k] for k in ("paper", "via")):
        raise InputError(f"{field} {metric}.source", source,
                         "a mapping {paper, figure, page, via} with paper and via")
    if not isinstance(entry.get("where", {}), Mapping):
        raise InputError(f"{field} {metric}.where", entry["where"], "a mapping")


def matches(result: Mapping[str, Any], where: Mapping[str, Any]) -> bool:
    scenario = result.get("scenario") or {}
    return all(lookup(scenario, str(k)) == v for k, v in where.items())


def source_text(source: Mapping[str, Any]) -> str:
    parts = [str(source["paper"]), str(source.get("figure") or "figure/table not recorded"),
             f"p. {source['page']}" if source.get("page") else "page not recorded"]
    return ", ".join(parts) + f" (value via {source['via']})"


def compare(simulated: float, entry: Mapping[str, Any]) -> str:
    """Simulated over published, as ``0.98×``; for a range, over each bound."""
    if "value" in entry:
        return show(simulated / float(entry["value"]), unit="x")
    low, high = (float(v) for v in entry["range"])
    where = "inside" if low <= simulated <= high else ("below" if simulated < low else "above")
    return f"{sig3(simulated / high)}–{sig3(simulated / low)}× ({where} the range)"


def published_text(entry: Mapping[str, Any]) -> str:
    if "value" in entry:
        return show(entry["value"], str(entry["metric"]))
    low, high = entry["range"]
    return f"{show(low, str(entry['metric']))} – {show(high, str(entry['metric']))}"


def paper_rows(results: Mapping[str, Mapping[str, Any]], data: Mapping[str, Any],
               labels: Mapping[str, str] | None = None) -> list[tuple[str, ...]]:
    """(metric, run, simulated, published, simulated / published, source) per entry and
    matching run; an entry no run matches, or a missing metric, says so."""
    rows: list[tuple[str, ...]] = []
    for entry in data["values"]:
        metric, where = str(entry["metric"]), dict(entry.get("where") or {})
        condition = ", ".join(f"{k}={v}" for k, v in where.items()) or "any run"
        named = [(n, r) for n, r in results.items() if matches(r, where)]
        if not named:
            rows.append((metric, f"missing: no run with {condition}", "missing",
                         published_text(entry), "n/a", source_text(entry["source"])))
        for name, result in named:
            value = lookup(result, metric)
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            rows.append((metric, (labels or {}).get(name, str(name)), show(value, metric) if ok
                         else "missing from result.json", published_text(entry),
                         compare(float(value), entry) if ok else "n/a",
                         source_text(entry["source"])))
    return rows


def built_in(results: Mapping[str, Mapping[str, Any]], labels: Mapping[str, str] | None = None
             ) -> list[tuple[str, dict[str, Any], list[tuple[str, ...]]]]:
    """(scenario name, file, rows) for each paper scenario among the results; ``labels`` name
    runs in words (a sweep point by its axis values)."""
    names = dict.fromkeys(lookup(r, "scenario.name") for r in results.values())
    out = []
    for name in names:
        path = reference_file(name)
        if path is None:
            continue
        data = load_paper(path)
        same = {n: r for n, r in results.items() if lookup(r, "scenario.name") == name}
        out.append((str(name), data, paper_rows(same, data, labels)))
    return out


# ------------------------------------------------------------------ --reference FILE (given)


def reference_rows(kind: str, results: Mapping[str, Mapping[str, Any]],
                   rows: Sequence[Mapping[str, Any]], path: Path) -> list[tuple[Any, ...]]:
    """(metric, where, simulated, reference, relative difference, source) per YAML entry."""
    entries = read_yaml(path, "--reference")
    if not isinstance(entries, list) or not all(isinstance(e, Mapping) for e in entries):
        raise InputError("--reference", str(path), "a YAML list of {metric, value, source}")
    out = []
    for e in entries:
        check_reference(e)
        name, result = pick(kind, results, rows, e)
        simulated = lookup(result, str(e["metric"])) if result else None
        ref = float(e["value"])
        diff = (float(simulated) - ref) / ref if isinstance(simulated, int | float) and ref \
            else None
        diff = diff if diff is not None and math.isfinite(diff) else None
        out.append((e["metric"], name or "not found", show(simulated, str(e["metric"]))
                    if simulated is not None else "not found", show(ref, str(e["metric"])),
                    f"{diff:+.1%}" if diff is not None else "n/a",
                    source_text(e["source"]) if isinstance(e["source"], Mapping)
                    else e["source"]))
    return out


def check_reference(e: Mapping[str, Any]) -> None:
    """One reference entry: a dotted metric name, a finite non-zero number (a relative
    difference divides by it), a source; ``run`` a name, ``where`` a mapping."""
    if not {"metric", "value", "source"} <= set(e):
        raise InputError("--reference", str(e), "entries with metric, value and source")
    unknown = sorted(str(k) for k in e if k not in REFERENCE_KEYS)
    if unknown:
        raise InputError("--reference", ", ".join(unknown), "entry keys among "
                         + ", ".join(sorted(REFERENCE_KEYS)) + " (unknown key)")
    if not isinstance(e["metric"], str) or not e["metric"]:
        raise InputError("--reference metric", e["metric"], "a dotted metric name (text)")
    value = e["value"]
    if isinstance(value, bool) or not isinstance(value, int | float) or not value \
            or not plausible(e["metric"], float(value)):
        raise InputError(f"--reference {e['metric']}.value", value,
                         "a finite plausible non-zero number")
    if "run" in e and not isinstance(e["run"], str | int):
        raise InputError("--reference run", e["run"], "a run name or sweep point id")
    if "where" in e and not isinstance(e["where"], Mapping):
        raise InputError("--reference where", e["where"], "a mapping {override key: value}")
    check_source(e["source"], f"--reference {e['metric']}.source")


def check_source(source: Any, field: str) -> None:
    """A reference's source: a non-empty text, or the built-in files' mapping {paper, figure,
    page, via} with paper a text (a list or number there is no citation)."""
    if isinstance(source, str) and source.strip():
        return
    if isinstance(source, Mapping) and set(source) <= SOURCE_KEYS \
            and all(isinstance(source.get(k), str) and source[k].strip()
                    for k in ("paper", "via")) \
            and all(isinstance(source.get(k), str | int | None) for k in SOURCE_KEYS):
        return
    raise InputError(field, source, "a text naming the source, or {paper: TEXT, via: TEXT, "
                     "figure, page}")


def pick(kind: str, results: Mapping[str, Mapping[str, Any]], rows: Sequence[Mapping[str, Any]],
         entry: Mapping[str, Any]) -> tuple[str, Mapping[str, Any] | None]:
    """The run or point an entry refers to (the only one when it names none)."""
    if "run" in entry:
        key = str(entry["run"])
        return key, results.get(key)
    if "where" in entry and kind == "sweep":
        want = {k: cell(v) for k, v in dict(entry["where"]).items()}
        for row in rows:
            if all(row.get(k) == v for k, v in want.items()) and row["id"] in results:
                return row["id"][:8], results[row["id"]]
        return "", None
    if len(results) == 1:
        return next(iter(results.items()))
    return "", None
