"""Helpers shared by the command modules: list flags, JSON output, atomic writes."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from libra_des.api.outputs import dumps, write_atomic
from libra_des.errors import InputError

__all__ = ["dumps", "int_list", "parse_list", "positive_ints", "write_atomic"]

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
