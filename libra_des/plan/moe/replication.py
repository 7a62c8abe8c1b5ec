"""Libra's locality-aware replication (docs/model.md B): N extra slots per GPU, split by alpha.

Phase 1 fills ``round(N * alpha)`` slots on each GPU with the remote experts its own tokens
are predicted to request most (this enlarges MoE_local). Phase 2 repeatedly takes the hottest
expert of the most-loaded GPU and replicates it to the least-loaded GPU that still has a free
slot and lacks the expert.

Across nodes (``node`` given), phase 1 considers only experts homed on the GPU's own node (a
copy over NVLink; a copy over the NIC costs more than the dispatch it saves: placing the
node's most-requested off-node experts instead made the 2-node layers 7-12% slower), and
phase 2 prefers a destination on the node of the expert's home
GPU, so the copy travels over NVLink rather than the NIC; only when no GPU there has a free
slot does it go to another node.

Planning load model (assumption): local pairs stay local and each expert's remote pairs split
evenly over its holders. "Hottest" means the most remote pairs on that GPU, because sharding
moves only remote pairs; a replica of an expert with no remote pairs could not take load.
"""

from __future__ import annotations

import numpy as np

from libra_des.plan.moe import kernel


def locality_replicas(counts: np.ndarray, home: np.ndarray, per_gpu: int) -> np.ndarray:
    """Phase 1: each GPU's ``per_gpu`` most-requested remote experts (with demand > 0)."""
    replicas = np.zeros_like(home)
    if per_gpu <= 0:
        return replicas
    score = np.where(home, -1, counts)
    top = np.argsort(-score, axis=1, kind="stable")[:, :per_gpu]
    rows = np.arange(home.shape[0])[:, None]
    replicas[rows, top] = np.take_along_axis(score, top, axis=1) > 0
    return replicas


def libra_replicas(
    counts: np.ndarray, home: np.ndarray, slots: int, alpha: float,
    node: np.ndarray | None = None,
) -> np.ndarray:
    """``[G, E]`` replica mask from predicted ``counts[origin, expert]`` (``node``: node of
    every GPU when the group spans nodes). Phase 2 (the hottest replicas into the free
    slots) runs in ``kernel.hottest_replicas``."""
    return libra_replica_phases(counts, home, slots, alpha, node)[0]


def libra_replica_phases(
    counts: np.ndarray, home: np.ndarray, slots: int, alpha: float,
    node: np.ndarray | None = None,
) -> tuple[np.ndarray, int]:
    """:func:`libra_replicas` and how many of its replicas phase 1 placed (one vectorised
    step per layer on the host; phase 2 places one replica per loop iteration)."""
    near = counts
    if node is not None:  # phase 1 copies only experts homed on the GPU's own node
        home_node = node[np.argmax(home, axis=0)]
        near = np.where(node[:, None] == home_node[None, :], counts, 0)
    replicas = locality_replicas(near, home, round(slots * alpha))
    phase1 = int(replicas.sum())
    free = slots - replicas.sum(axis=1)
    holders = home | replicas
    kernel.hottest_replicas(np.asarray(counts, dtype=np.int64), holders, replicas,
                            np.asarray(free, dtype=np.int64),
                            np.empty(0, dtype=np.int64) if node is None else node,
                            np.argmax(home, axis=0))
    return replicas, phase1
