"""Expert-parallel load imbalance per MoE system: max GPU load over mean, mean over layers.

The systems sweep is :func:`paper_figs.libra_moe.systems.systems_study`.
"""

from __future__ import annotations

from paper_figs.libra_moe.systems import SystemBars

FIGURE = SystemBars(
    "moe_imbalance", "Expert-parallel load imbalance per system",
    "imbalance ratio (max GPU load / mean, mean over layers)",
    lambda r: r["imbalance_ratio"]["mean"], "imbalance_ratio_mean",
)
NAME = FIGURE.NAME
TITLE = FIGURE.TITLE
make = FIGURE.make
