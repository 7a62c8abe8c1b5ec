"""Figures of the Libra long-context training paper (docs/model.md part A)."""
