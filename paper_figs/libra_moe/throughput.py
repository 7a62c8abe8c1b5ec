"""Prefill throughput per MoE system (bars with seed error bars).

The systems sweep is :func:`paper_figs.libra_moe.systems.systems_study`.
"""

from __future__ import annotations

from paper_figs.libra_moe.systems import SystemBars

FIGURE = SystemBars(
    "moe_throughput", "MoE prefill throughput per system",
    "prefill throughput (thousand tokens/s)",
    lambda r: r["prefill_tokens_per_s"] / 1e3, "thousand_tokens_per_s",
)
NAME = FIGURE.NAME
TITLE = FIGURE.TITLE
make = FIGURE.make
