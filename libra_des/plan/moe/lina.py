"""Lina's inference-time replication, driven by its path-table prediction (docs/model.md B).

From the predicted pairs per expert, repeatedly give one more replica to the expert with the
largest predicted load per copy, on the GPU with the least predicted load that has a free slot
and lacks the expert, until the slots are full. Tokens are then spread evenly over an expert's
copies (no token sharding), and copies move off the critical path on the copy engine.

Published system (Lina, ATC'23): estimates expert popularity per layer from the
expert-selection paths of earlier layers and schedules replicas and resources ahead of the
layer. Where the model simplifies: the path table is one co-occurrence table per adjacent
layer pair, learned from a profiling sample of the served dataset's routing model (its
accuracy is measured, not set: ``workload/predictors.py``); replica placement is the greedy
rule above; the planning runs on the host (``sim/moe/host.py``, ``replication_cpu``).
"""

from __future__ import annotations

import numpy as np


def lina_replicas(predicted: np.ndarray, home: np.ndarray, slots: int) -> np.ndarray:
    """``[G, E]`` replica mask from ``predicted[e]`` pairs per expert."""
    replicas = np.zeros_like(home)
    holders = home.copy()
    free = np.full(home.shape[0], slots)
    pred = np.asarray(predicted, dtype=np.float64)
    while (free > 0).any():
        per_copy = pred / holders.sum(axis=0)
        loads = (holders * per_copy[None, :]).sum(axis=1)
        placed = False
        for e in np.argsort(-per_copy, kind="stable"):
            if per_copy[e] <= 0:
                break
            ok = (free > 0) & ~holders[:, e]
            if ok.any():
                g = int(np.argmin(np.where(ok, loads, np.inf)))
                replicas[g, e] = holders[g, e] = True
                free[g] -= 1
                placed = True
                break
        if not placed:
            break
    return replicas
