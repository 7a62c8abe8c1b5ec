"""Cluster model: topologies, cost models, calibration profiles, runtime variance.

Knows nothing of Libra: it answers how long a kernel, a transfer or a collective takes, and
what noise a GPU adds. One subpackage per concept: ``fabric/`` (the cluster's description),
``collectives/`` (communication pricing), ``compute/`` (kernels, memory, interference),
``profiles/`` (measured and datasheet numbers), ``variance/`` (runtime noise); ``costs.py``
is the one entry point for every price.
"""
