"""Every field of a scenario, its default and its source (``libra-des scenario show``).

Each leaf of the validated scenario is listed with the value the run would use, the value it
would take if the key were left out (its model's default; ``required`` when it has none), and
where the value came from: ``--set``, the scenario file, the model or workload file the
scenario names (shown by its path relative to the repository), or ``default``. pydantic is
loaded with the scenario models anyway (``libra_des.config``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TypedDict

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from libra_des.api.scenarios import load_scenario

__all__ = ["ScenarioField", "scenario_fields"]


class ScenarioField(TypedDict):
    """One leaf: dotted name, the value the run uses, its default, where the value came from."""

    field: str
    value: Any
    default: Any
    source: str


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
    from libra_des.config import ROOT, include, read_yaml

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
    from libra_des.config import ROOT, read_yaml

    found = Path(path)
    return read_yaml(found if found.is_absolute() else ROOT / found)


def scenario_fields(scenario_path: str, overrides: list[str]) -> list[ScenarioField]:
    """Every leaf of the validated scenario (``--set`` applied): its value, its default and
    where the value came from."""
    from libra_des.config import shipped_scenario

    scenario = load_scenario(scenario_path, overrides)
    raw, files, set_keys = sources(shipped_scenario(scenario_path), overrides)
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
    return [ScenarioField(field=key, value=value, default=default_of(scenario, key),
                          source=source_of(key, raw, files, set_keys))
            for key, value in leaves(dumped)]
