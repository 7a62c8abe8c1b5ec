"""One MoE layer's plan for each system: SGLang, EPLB, Lina, HarMoEny and Libra.

Each function takes the layer's routed experts ``routed[T, k]`` and the origin GPU of every
token, and returns a :class:`MoeLayerPlan`. Predictions enter as predicted routing of the same
tokens (``predicted[T, k]``). Planning that Libra and HarMoEny run on the CPU at serve time
(the greedy moves over the ``[G, E]`` pair counts, which the GPUs count after the gate) can
be timed with ``timer`` (e.g.
``time.perf_counter``); the result lands in ``cpu_wall_s``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from libra_des.plan.moe import kernel
from libra_des.plan.moe.assignment import (
    MoeLayerPlan,
    copy_matrix,
    dispatch_matrix,
    materialise,
    split_evenly,
)
from libra_des.plan.moe.harmoeny import harmoeny_moves
from libra_des.plan.moe.lina import lina_replicas
from libra_des.plan.moe.replication import libra_replica_phases
from libra_des.plan.moe.sharding import shard_remote_tokens

Timer = Callable[[], float]


@dataclass(frozen=True)
class MoeSetup:
    """What every planner needs to know about the EP group and the model."""

    home: np.ndarray  # [G, E] static home placement
    slots: int  # extra expert slots per GPU (Libra, Lina)
    alpha: float  # Libra's locality share of the slots
    tolerance: float  # sharding stop rule
    token_bytes: float  # one token's hidden state
    expert_bytes: float  # one expert's weights
    gpus_per_node: int = 0  # 0: the whole group is one node

    @property
    def shape(self) -> tuple[int, int]:
        """(GPUs, experts)."""
        return int(self.home.shape[0]), int(self.home.shape[1])

    @property
    def node(self) -> np.ndarray | None:
        """``[G]`` node of every GPU, or None when the group is one node."""
        g = self.home.shape[0]
        if self.gpus_per_node <= 0 or self.gpus_per_node >= g:
            return None
        return np.arange(g) // self.gpus_per_node


def finish(
    policy: str,
    routed: np.ndarray,
    origin: np.ndarray,
    setup: MoeSetup,
    holders: np.ndarray,
    replicas: np.ndarray,
    load: np.ndarray,
    copy_bytes: np.ndarray | None = None,
    iterations: int = 0,
    cpu_wall_s: float | None = None,
    counts: np.ndarray | None = None,
    vectorised: int = 0,
) -> MoeLayerPlan:
    """Derive local work and exact dispatch bytes (on first use) from a load matrix
    (``counts``: the routing's :func:`origin_counts`, when the planner already has them)."""
    g = setup.shape[0]
    if counts is None:
        counts = pair_counts(routed, origin, setup)
    if not np.array_equal(counts.sum(axis=0), load.sum(axis=0)):
        raise ValueError("load does not conserve the pairs of every expert")
    return MoeLayerPlan(
        policy=policy,
        holders=holders,
        replicas=replicas,
        load=load,
        local=np.minimum(counts, load),
        dispatch=partial(dispatch_bytes, routed, origin, load, counts, setup),
        copy_bytes=np.zeros((g, g)) if copy_bytes is None else copy_bytes,
        sharding_iterations=iterations,
        cpu_wall_s=cpu_wall_s,
        vectorised_replicas=vectorised,
    )


def pair_counts(routed: np.ndarray, origin: np.ndarray, setup: MoeSetup) -> np.ndarray:
    """``[G, E]`` pairs of each origin GPU per expert (``kernel.origin_counts``)."""
    return np.asarray(kernel.origin_counts(routed, np.asarray(origin, dtype=np.int64),
                                           *setup.shape))


def dispatch_bytes(
    routed: np.ndarray, origin: np.ndarray, load: np.ndarray, counts: np.ndarray,
    setup: MoeSetup,
) -> np.ndarray:
    """``[G, G]`` dispatch bytes of the pairs placed by ``load`` (``materialise``, then
    ``dispatch_matrix`` for a load of another type; integer loads, as every shipped planner
    makes them, in one pass of ``kernel.dispatch_pairs``)."""
    if not np.issubdtype(load.dtype, np.integer):
        dest = materialise(routed, origin, load, counts)
        return dispatch_matrix(dest, origin, setup.shape[0], setup.token_bytes)
    pairs = kernel.dispatch_pairs(routed, np.asarray(origin, dtype=np.int64),
                                  np.asarray(load, dtype=np.int64),
                                  np.asarray(counts, dtype=np.int64))
    return np.asarray(pairs * float(setup.token_bytes))


def expert_totals(routed: np.ndarray, experts: int) -> np.ndarray:
    return np.bincount(routed.ravel().astype(np.int64), minlength=experts)


def sglang_plan(routed: np.ndarray, origin: np.ndarray, setup: MoeSetup) -> MoeLayerPlan:
    """Static placement, every pair on its expert's home GPU."""
    load = setup.home * expert_totals(routed, setup.shape[1])[None, :]
    none = np.zeros_like(setup.home)
    return finish("sglang", routed, origin, setup, setup.home, none, load)


def eplb_copies(phy2log: np.ndarray, gpus: int, experts: int) -> tuple[np.ndarray, np.ndarray]:
    """``(copies[G, E], replicas[G, E])`` of one layer's EPLB physical layout.

    ``replicas`` marks GPUs holding an expert other than the GPU of its first copy.
    """
    per_gpu = phy2log.size // gpus
    gpu = np.arange(phy2log.size) // per_gpu
    copies = np.zeros((gpus, experts), dtype=np.int64)
    np.add.at(copies, (gpu, phy2log), 1)
    first = np.zeros((gpus, experts), dtype=bool)
    _, first_slot = np.unique(phy2log, return_index=True)
    first[gpu[first_slot], phy2log[first_slot]] = True
    return copies, (copies > 0) & ~first


def eplb_plan(
    routed: np.ndarray, origin: np.ndarray, setup: MoeSetup, phy2log: np.ndarray
) -> MoeLayerPlan:
    """Static EPLB layout (weights preloaded); pairs spread evenly over an expert's copies."""
    g, e = setup.shape
    copies, replicas = eplb_copies(phy2log, g, e)
    load = split_evenly(expert_totals(routed, e), copies)
    return finish("eplb", routed, origin, setup, copies > 0, replicas, load)


def lina_plan(
    routed: np.ndarray, origin: np.ndarray, predicted: np.ndarray, setup: MoeSetup
) -> MoeLayerPlan:
    """Replicas from the path-table prediction; pairs spread evenly over copies."""
    e = setup.shape[1]
    replicas = lina_replicas(expert_totals(predicted, e), setup.home, setup.slots)
    holders = setup.home | replicas
    load = split_evenly(expert_totals(routed, e), holders)
    copies = copy_matrix(replicas, setup.home, setup.expert_bytes)
    return finish("lina", routed, origin, setup, holders, replicas, load, copies)


def libra_plan(
    routed: np.ndarray,
    origin: np.ndarray,
    predicted: np.ndarray,
    setup: MoeSetup,
    timer: Timer | None = None,
) -> MoeLayerPlan:
    """Locality-aware replicas from the prediction, then CPU sharding of the remote pairs."""
    replicas, phase1 = libra_replica_phases(pair_counts(predicted, origin, setup), setup.home,
                                            setup.slots, setup.alpha, setup.node)
    holders = setup.home | replicas
    counts = pair_counts(routed, origin, setup)  # on the GPU, right after the gate
    start = timer() if timer else 0.0
    shard = shard_remote_tokens(counts, holders, setup.home, setup.tolerance, node=setup.node)
    wall = timer() - start if timer else None
    copies = copy_matrix(replicas, setup.home, setup.expert_bytes)
    return finish("libra", routed, origin, setup, holders, replicas, shard.load, copies,
                  shard.iterations, wall, counts, phase1)


def harmoeny_plan(
    routed: np.ndarray, origin: np.ndarray, setup: MoeSetup, timer: Timer | None = None
) -> MoeLayerPlan:
    """Greedy token moves on the exact routing; receivers fetch the weights they lack."""
    counts = pair_counts(routed, origin, setup)
    start = timer() if timer else 0.0
    moves = harmoeny_moves(counts, setup.home, setup.tolerance)
    wall = timer() - start if timer else None
    fetch = copy_matrix(moves.fetched, setup.home, setup.expert_bytes)
    none = np.zeros_like(setup.home)
    holders = setup.home | moves.fetched
    return finish("harmoeny", routed, origin, setup, holders, none, moves.load, fetch,
                  moves.iterations, wall, counts)
