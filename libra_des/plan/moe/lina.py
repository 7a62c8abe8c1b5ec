"""Lina's inference-time replication, driven by its path-table prediction (docs/model.md B).

From the predicted pairs per expert, repeatedly give one more replica to the expert with the
largest predicted load per copy, on the GPU with the least predicted load that has a free slot
and lacks the expert, until the slots are full. Tokens are then spread evenly over an expert's
copies (no token sharding), and copies move off the critical path on the copy engine.
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
