"""``libra-des scenario show S [--set K=V ...] [--json]``: every field, its default, its source.

Each leaf of the validated scenario is listed with the value the run would use, the value it
would take if the key were left out (its model's default; ``required`` when it has none), and
where the value came from: ``--set``, the scenario file, the model or workload file the
scenario names (shown by its path relative to the repository), or ``default``.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from libra_des.commands.common import dumps


def register(subs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subs.add_parser("scenario", help="inspect a scenario: every field, default and source")
    acts = p.add_subparsers(dest="action", required=True, parser_class=type(p))
    show = acts.add_parser("show", help="print every field with its default and source")
    show.add_argument("scenario", help="scenario YAML file")
    show.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                      help="override a field first, as `run --set` does (repeatable)")
    show.add_argument("--json", action="store_true", help='print {"fields": [...]} as JSON')
    show.set_defaults(handler=handle_show)


def leaves(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path, value) of every leaf of a dumped model (lists are leaves)."""
    if isinstance(value, Mapping) and value:
        for key, sub in value.items():
            yield from leaves(sub, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, value


def default_of(model: BaseModel, path: str) -> Any:
    """The default of the field at ``path``: what it would be if the key were left out."""
    obj: Any = model
    parts = path.split(".")
    for i, part in enumerate(parts):
        if not isinstance(obj, BaseModel) or part not in type(obj).model_fields:
            return "-"  # inside a free-form mapping or list
        field = type(obj).model_fields[part]
        if i == len(parts) - 1:
            if field.default is PydanticUndefined and field.default_factory is None:
                return "required"
            got = field.get_default(call_default_factory=True)
            return got.model_dump(mode="json") if isinstance(got, BaseModel) else got
        obj = getattr(obj, part)
    return "-"


def has(raw: Any, path: list[str]) -> bool:
    for part in path:
        if not isinstance(raw, Mapping) or part not in raw:
            return False
        raw = raw[part]
    return True


def sources(path: Path, overrides: list[str]) -> tuple[Any, dict[str, str], set[str]]:
    """(raw file mapping, {section: included file}, keys set on the command line)."""
    from libra_des.api import ROOT, include, read_yaml

    raw = read_yaml(path)
    files = {}
    for key, folder in (("model", "workloads/models"), ("workload", "workloads")):
        if isinstance(raw, Mapping) and isinstance(raw.get(key), str):
            found = Path(include(raw[key], key, path.resolve().parent, folder)["source_file"])
            try:
                files[key] = str(found.resolve().relative_to(ROOT))
            except ValueError:
                files[key] = str(found)
    return raw, files, {o.partition("=")[0] for o in overrides}


def source_of(key: str, raw: Any, files: dict[str, str], set_keys: set[str]) -> str:
    parts = key.split(".")
    if any(".".join(parts[:i]) in set_keys for i in range(1, len(parts) + 1)):
        return "--set"
    if has(raw, parts):
        return "scenario file"
    if parts[0] in files and isinstance(raw, Mapping) and isinstance(raw.get(parts[0]), str):
        inner = parts[1:]
        return files[parts[0]] if inner and has(include_raw(files[parts[0]]), inner) else \
            "default"
    return "default"


def include_raw(path: str) -> Any:
    from libra_des.api import ROOT, read_yaml

    found = Path(path)
    return read_yaml(found if found.is_absolute() else ROOT / found)


def rows(scenario_path: str, overrides: list[str]) -> list[dict[str, Any]]:
    from libra_des.api import load_scenario

    scenario = load_scenario(scenario_path, overrides)
    raw, files, set_keys = sources(Path(scenario_path), overrides)
    dumped = scenario.model_dump(mode="json")
    # Fields a dump leaves out while at their default (profile_scope, overlap, comm's
    # interference knobs) are listed too.
    for key in type(scenario).model_fields:
        value = getattr(scenario, key)
        full = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
        if key not in dumped:
            dumped[key] = full
        elif isinstance(full, dict) and isinstance(dumped[key], dict):
            dumped[key] |= {k: v for k, v in full.items() if k not in dumped[key]}
    return [{"field": key, "value": value, "default": default_of(scenario, key),
             "source": source_of(key, raw, files, set_keys)}
            for key, value in leaves(dumped)]


def as_json(value: Any) -> Any:
    """A section (``network``) as a dump would write it; any other value as it is."""
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


def handle_show(args: argparse.Namespace) -> int:
    table_rows = rows(args.scenario, args.set)
    if args.json:
        print(dumps({"fields": table_rows}))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{args.scenario}: {len(table_rows)} fields")
    for col in ("field", "value", "default", "source"):
        table.add_column(col, overflow="fold")
    for r in table_rows:
        table.add_row(r["field"], short(r["value"]), short(r["default"]), r["source"])
    out = Console()
    (out if out.is_terminal else Console(width=160)).print(table)
    return 0


def short(value: Any) -> str:
    text = value if isinstance(value, str) else dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."
