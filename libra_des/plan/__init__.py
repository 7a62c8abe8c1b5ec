"""Planners: pure functions from workload + config to plan objects (no SimPy here)."""
