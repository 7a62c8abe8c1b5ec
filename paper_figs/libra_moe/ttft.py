"""Mean time to first token per MoE system (bars with seed error bars).

The systems sweep is :func:`paper_figs.libra_moe.systems.systems_study`.
"""

from __future__ import annotations

from paper_figs.libra_moe.systems import SystemBars

FIGURE = SystemBars(
    "moe_ttft", "Time to first token per system", "mean time to first token (s)",
    lambda r: r["ttft_s"]["mean"], "ttft_mean_s",
)
NAME = FIGURE.NAME
TITLE = FIGURE.TITLE
make = FIGURE.make
