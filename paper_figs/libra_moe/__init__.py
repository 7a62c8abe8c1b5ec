"""Figures of the Libra MoE prefill paper (docs/model.md part B)."""
