"""The report's names for the one number formatter (:mod:`libra_des.results.numbers`, over
:mod:`libra_des.base.numbers`)."""

from __future__ import annotations

from libra_des.results.numbers import plausible, rounded, show, sig3, unit_of, with_unit

__all__ = ["plausible", "rounded", "show", "sig3", "unit_of", "with_unit"]
