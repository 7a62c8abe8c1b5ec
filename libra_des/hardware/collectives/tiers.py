"""Curve tiers as users read them: which tier priced an op (measured, borrowed, datasheet;
the tiers themselves are :mod:`~libra_des.hardware.collectives.communication`'s) and the
result keys that report them."""

from __future__ import annotations

from typing import Any

DATASHEET_TIER = 4
#: User-facing name of each curve tier (communication.py's docstring lists the tiers).
TIER_NAMES = ("measured", "measured", "borrowed", "borrowed", "datasheet")


def tier_name(tier: int) -> str:
    return TIER_NAMES[min(max(tier, 0), DATASHEET_TIER)]


def tier_keys(tiers: dict[str, str], choices: dict[str, Any] | None = None,
              layout: dict[str, Any] | None = None) -> dict[str, object]:
    """``comm_tiers`` (op -> measured, borrowed or datasheet: the curves that priced it),
    ``uncalibrated_ops`` (ops on datasheet numbers), ``comm_choices`` (op -> NCCL's
    algorithm, protocol, channels for its largest call) and ``fabric_layout``
    (:meth:`~libra_des.hardware.fabric.topology.Topology.layout`)."""
    return {
        "fabric_layout": layout or {},
        "comm_tiers": dict(sorted(tiers.items())),
        "uncalibrated_ops": sorted(op for op, t in tiers.items() if t == "datasheet"),
        "comm_choices": dict(sorted((choices or {}).items())),
    }
