"""Tables of results: one row per run or per sweep point, for pandas, spreadsheets and Arrow.

* a run's row is every scalar of its ``result.json`` under dotted names (``step_time_s.mean``)
  plus the scenario's scalars under ``scenario.``; lists (per-layer series) stay in the JSON;
* a sweep's table has one row per point: ``id``, ``error``, one column per override key
  (``parallelism.dp``) and every scalar metric of the point's result.

CSV is always written (standard library); Parquet too when pyarrow is installed (the
``tables`` extra). :func:`load_sweep` needs pandas (the same extra) and returns a DataFrame.
Nothing here imports pandas or pyarrow at module level.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from libra_des.base.storage import write_atomic
from libra_des.errors import CheckError, InputError

Row = dict[str, Any]
SCALARS = (int, float, str, bool)


def flatten(data: Mapping[str, Any], prefix: str = "", skip: Iterable[str] = ()) -> Row:
    """Scalars of nested mappings under dotted keys; lists and ``skip`` keys are left out."""
    out: Row = {}
    skipped = set(skip)
    for key, value in data.items():
        if key in skipped:
            continue
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        elif value is None or isinstance(value, SCALARS):
            out[name] = value
    return out


def cell(value: Any) -> Any:
    """A table cell: scalars as they are, mappings and lists as compact JSON text."""
    if value is None or isinstance(value, SCALARS):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def run_row(result: Mapping[str, Any]) -> Row:
    """One run as one row: metrics first, then the scenario's scalars."""
    row = flatten(result, skip=("scenario",))
    scenario = result.get("scenario")
    if isinstance(scenario, Mapping):
        row.update(flatten(scenario, "scenario."))
    return row


def read_result(path: Path, field: str = "report", plausible: bool = True) -> dict[str, Any]:
    """A ``result.json`` (or ``sweep.json``) read strictly: a JSON object, finite numbers, no
    duplicate keys, bounded nesting, and (results) every number plausible (fractions in
    [0, 1], nothing negative: :func:`~libra_des.results.plausibility.check_numbers`); else one
    :class:`InputError` line naming the file."""
    from libra_des.config.validation import parse_json, read_bounded
    from libra_des.results.plausibility import check_numbers

    try:
        data = parse_json(read_bounded(path, field), field, str(path))
    except (OSError, UnicodeDecodeError):
        raise InputError(field, str(path), "a readable result JSON file") from None
    if not isinstance(data, dict):
        raise InputError(field, str(path), "a JSON object")
    try:
        if plausible:
            check_numbers(data)
    except CheckError as exc:
        raise InputError(field, str(path), f"a plausible result ({exc})") from None
    return data


def sweep_points(folder: Path, field: str = "report") -> list[dict[str, Any]]:
    """The points of ``folder/sweep.json``, each checked for the keys a table reads
    (``id``, ``file`` inside the folder, ``overrides`` a mapping)."""
    if not isinstance(folder, str | Path):
        raise InputError(field, folder, "a sweep folder path")
    path = Path(folder) / "sweep.json"
    if not path.is_file():
        raise InputError(field, str(folder), "a sweep folder (with sweep.json)")
    points = read_result(path, field, plausible=False).get("points")
    if not isinstance(points, list):
        raise InputError(field, str(path), "a sweep index with a list of points")
    root = Path(folder).resolve()
    for p in points:
        ok = (isinstance(p, dict) and isinstance(p.get("id"), str)
              and isinstance(p.get("file"), str) and isinstance(p.get("overrides"), dict))
        if not ok or not (root / p["file"]).resolve().is_relative_to(root):
            raise InputError(field, str(path), "points with id, file (inside the folder) "
                             "and overrides")
    return points


def sweep_rows(folder: Path, field: str = "report") -> list[Row]:
    """One row per point of ``folder/sweep.json`` (overrides, then metrics)."""
    rows = []
    for point in sweep_points(folder, field):
        row: Row = {"id": point["id"], "error": point.get("error", "")}
        row.update({k: cell(v) for k, v in point["overrides"].items()})
        path = Path(folder) / point["file"]
        if path.is_file() and not point.get("error"):
            row.update(flatten(read_result(path, field), skip=("scenario",)))
        rows.append(row)
    return rows


def csv_text(rows: Sequence[Mapping[str, Any]]) -> str:
    header = list(dict.fromkeys(k for row in rows for k in row))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def uniform(rows: Sequence[Mapping[str, Any]]) -> list[Row]:
    """Columns whose values mix types (an override given as 4 and as 'auto') become text,
    which Arrow needs; ``None`` stays missing."""
    header = list(dict.fromkeys(k for row in rows for k in row))
    mixed = set()
    for key in header:
        kinds = {type(row[key]) for row in rows if row.get(key) is not None}
        if len(kinds - {int, float}) > 1 or (kinds & {str, bool} and kinds & {int, float}):
            mixed.add(key)
    return [{k: (str(row[k]) if k in mixed and row.get(k) is not None else row.get(k))
             for k in header} for row in rows]


def write_table(rows: Sequence[Mapping[str, Any]], stem: Path) -> list[Path]:
    """``stem.csv`` always, ``stem.parquet`` when pyarrow is importable; atomic writes."""
    written = [stem.with_suffix(".csv")]
    write_atomic(written[0], csv_text(rows))
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return written
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(uniform(rows)), sink)
    path = stem.with_suffix(".parquet")
    write_atomic(path, sink.getvalue().to_pybytes())
    return [*written, path]


def write_run_table(result: Mapping[str, Any], folder: Path) -> list[Path]:
    return write_table([run_row(result)], folder / "result")


def write_sweep_table(folder: Path) -> list[Path]:
    return write_table(sweep_rows(folder), folder / "sweep")


def load_sweep(folder: str | Path) -> Any:
    """A sweep folder as a pandas DataFrame, one row per point (needs the ``tables`` extra).

    The folder is read and checked first: bad input is an :class:`InputError` with or
    without pandas; only a good sweep without pandas raises ImportError."""
    if not isinstance(folder, str | Path):
        raise InputError("load_sweep", folder, "a sweep folder path")
    rows = uniform(sweep_rows(Path(folder), "load_sweep"))
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("load_sweep needs pandas: pip install 'libra-des[tables]'") from None
    return pd.DataFrame(rows)
