"""Strict YAML reading: every input file and ``--set`` value, and the project's own data.

A user's YAML is parsed by :class:`StrictLoader`: duplicate keys, the YAML 1.1 types no
field takes (``!!binary``, ``!!timestamp``, ...) and anything :func:`check_tree` refuses are
one :class:`InputError`. Numbers and switches follow YAML 1.2 (``1e12`` is a number; only
``true``/``false`` are switches).

The package's own data files (GPU records, NCCL's constants, the preflight's factors) are
read through libyaml where PyYAML was built with it: the same resolvers and checks, with the
scanner and parser in C (every run reads the records; benchmarks/README.md has the saving).
Those files are ours and bounded; a user's file always goes through the Python parser, whose
nesting is bounded by Python's recursion limit.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from libra_des.config.validation import MAX_DEPTH, check_tree, read_bounded
from libra_des.errors import InputError


class _Duplicate(Exception):
    def __init__(self, key: Any, line: int) -> None:
        self.key, self.line = key, line


class _Refused(Exception):
    def __init__(self, tag: str, line: int) -> None:
        self.tag, self.line = tag, line


class _StrictMappings(yaml.constructor.SafeConstructor):
    """Mappings with each key once (the constructor half of both strict loaders)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                if key in seen:
                    raise _Duplicate(key, key_node.start_mark.line + 1)
                seen.add(key)
            except TypeError:  # unhashable keys: the base constructor reports them
                break
        return super().construct_mapping(node, deep=deep)


class StrictLoader(_StrictMappings, yaml.SafeLoader):
    """Safe YAML loader that refuses duplicate keys and reads YAML 1.2 numbers."""


#: The same loader on libyaml's scanner and parser (None where PyYAML lacks libyaml).
StrictCLoader: type[yaml.CSafeLoader] | None = (
    type("StrictCLoader", (_StrictMappings, yaml.CSafeLoader), {})
    if yaml.__with_libyaml__ else None)


def _refuse(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    """YAML 1.1 types no input field takes (``!!binary`` bytes, ``!!timestamp`` dates): a
    value such a tag builds would pass as text or an object where a name or number goes."""
    raise _Refused(node.tag.rsplit(":", 1)[-1], node.start_mark.line + 1)


# PyYAML's YAML 1.1 float pattern needs a dot and a signed exponent, so `1e12` and `1e-3`
# would be strings; YAML 1.2 (and every reader) takes them as numbers.
_FLOAT_12 = re.compile(r"^[-+]?(?:[0-9][0-9_]*)?(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")
_BOOL = "tag:yaml.org,2002:bool"


def _make_strict(cls: Any) -> None:
    for tag in ("binary", "timestamp", "set", "omap", "pairs"):
        cls.add_constructor(f"tag:yaml.org,2002:{tag}", _refuse)
    cls.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_12, list("-+0123456789."))
    # YAML 1.1 also reads yes/no/on/off as booleans, so a typo like `keep_remote_kv: yes` or
    # a name `off` would pass as a switch; YAML 1.2 keeps only true/false (the strict types
    # then refuse the rest as text). add_implicit_resolver above gave the class its own lists.
    for first, resolvers in cls.yaml_implicit_resolvers.items():
        cls.yaml_implicit_resolvers[first] = [r for r in resolvers if r[0] != _BOOL]
    cls.add_implicit_resolver(
        _BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))


_make_strict(StrictLoader)
if StrictCLoader is not None:
    _make_strict(StrictCLoader)


def bracket_depth(text: str) -> int:
    """Deepest nesting of ``[``/``{`` outside quotes: a cheap upper view of flow nesting."""
    depth = deepest = 0
    quote = ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def parse_yaml(text: str, field: str, where: str, ours: bool = False) -> Any:
    """Parse YAML text strictly; any problem is one :class:`InputError` on ``field``.
    ``ours``: a file of the package's own (libyaml's parser where there is one)."""
    if bracket_depth(text) > 4 * MAX_DEPTH:  # refuse at once, before the parser recurses
        raise InputError(field, where, f"nesting at most {MAX_DEPTH} levels deep")
    loader = StrictCLoader if ours and StrictCLoader is not None else StrictLoader
    try:
        data = yaml.load(text, Loader=loader)
    except _Duplicate as dup:
        raise InputError(
            field, where, f"each key once (duplicate {dup.key!r}, line {dup.line})"
        ) from None
    except _Refused as tag:
        raise InputError(field, where, f"plain text, numbers, lists and mappings (no "
                         f"!!{tag.tag}, line {tag.line})") from None
    except RecursionError:
        raise InputError(field, where, f"nesting at most {MAX_DEPTH} levels deep") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark is not None else ""
        raise InputError(field, where, f"well-formed YAML{at}") from None
    check_tree(data, field)
    return data


def parse_value(text: str, key: str) -> Any:
    """One ``--set`` value: YAML (1.2 numbers); text that is not YAML stays a string."""
    if not text:
        return ""
    try:
        value = yaml.load(text, Loader=StrictLoader)
    except _Duplicate as dup:
        raise InputError(
            f"--set {key}", text, f"each key once (duplicate {dup.key!r})"
        ) from None
    except RecursionError:
        raise InputError(f"--set {key}", text, f"nesting at most {MAX_DEPTH} levels") from None
    except yaml.YAMLError:
        return text
    check_tree(value, key)
    return value


def package_yaml(path: Path) -> Any:
    """One of the package's own data files, parsed as :func:`parse_yaml` parses input."""
    return parse_yaml(read_bounded(path), str(path), str(path), ours=True)
