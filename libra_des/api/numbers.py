"""Numbers as people read them, for the commands: three significant digits with a unit
(:mod:`libra_des.base.numbers`; result values by their dotted name,
:mod:`libra_des.results.numbers`). ``--json`` output never goes through here."""

from __future__ import annotations

from typing import Any

from libra_des.base.numbers import sig3, with_unit

__all__ = ["pct", "show", "sig3", "signed_pct", "with_unit"]


def show(value: Any, dotted: str = "", unit: str | None = None) -> str:
    """A result value as the terminal and the page write it (its unit from ``dotted``; an
    impossible value as ``n/a``)."""
    from libra_des.results.numbers import show as shown

    return shown(value, dotted, unit)


def pct(value: Any) -> str:
    """A number of per cent from a result row (three significant digits, no unit: the
    column's title says %)."""
    return sig3(float(value))


def signed_pct(value: Any) -> str:
    """:func:`pct` with its sign (``+1.20``, ``-3.40``)."""
    return ("+" if float(value) >= 0 else "") + pct(value)
