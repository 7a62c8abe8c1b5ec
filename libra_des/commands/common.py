"""Helpers shared by the command modules: list flags, JSON output, atomic writes."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from libra_des.errors import InputError

T = TypeVar("T")


def parse_list(flag: str, text: str, cast: Callable[[str], T]) -> list[T]:
    """``"2,4,8"`` -> ``[2, 4, 8]``; a bad item is an input error naming the flag."""
    out: list[T] = []
    for item in text.split(","):
        try:
            out.append(cast(item.strip()))
        except ValueError:
            raise InputError(flag, text, f"a comma-separated list of {cast.__name__}") from None
    if not out:
        raise InputError(flag, text, "a non-empty list")
    return out


def int_list(flag: str, text: str, minimum: int = 1) -> list[int]:
    """Comma-separated integers, each at least ``minimum``."""
    values = parse_list(flag, text, int)
    for v in values:
        if v < minimum:
            raise InputError(flag, v, f"integers >= {minimum}")
    return values


def positive_ints(flag: str, text: str) -> list[int]:
    return int_list(flag, text, minimum=1)


def dumps(obj: Any) -> str:
    """Canonical JSON (sorted keys) so equal results are byte-identical."""
    return json.dumps(obj, sort_keys=True, indent=2, allow_nan=False)


def write_atomic(path: Path, text: str) -> None:
    """Write through a temporary file and rename, so no half-written output survives."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
