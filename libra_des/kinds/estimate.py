"""A preflight estimate (memory and wall time of a run), below both the kind registry that
declares each kind's estimator and the preflight that computes and checks them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Estimate:
    bytes: float
    seconds: float

    def text(self) -> str:
        return f"about {self.bytes / 1e9:.3g} GB and {self.seconds / 60:.3g} min"
