"""Cluster model: topologies, cost models, calibration profiles, runtime variance.

Knows nothing of Libra: it answers how long a kernel, a transfer or a collective takes, and
what noise a GPU adds.
"""
