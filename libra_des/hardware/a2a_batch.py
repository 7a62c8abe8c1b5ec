"""Many uneven all-to-alls of one layout priced in one pass over the stack.

A training step prices four all-to-all(v) matrices per attention slot: 2,288 calls of
:meth:`Communication.all_to_allv` at 16k GPUs and 16,384 at 131k, each a dozen numpy calls
on a 64 x 64 matrix. :func:`all_to_allv_batch` gives the same seconds, bit for bit, from
operations on a ``[S, n, n]`` stack: every elementwise step is the same, each row or column
sum reduces along the same axis in the same order, and the per-node sums are added rank by
rank as ``np.bincount`` adds them. Layouts it does not cover (PCIe switch bridges, curves
with a small-message term across nodes, more than one switch level below the top, a
partial last node) go
through :meth:`Communication.all_to_allv` one matrix at a time.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import numpy as np

from libra_des.errors import InputError
from libra_des.hardware.alltoall import InterNodeA2A
from libra_des.hardware.communication import Communication

#: Matrices priced together: keeps the stack's temporaries to a few MiB (256 x 64 x 64
#: float64 is 8 MiB); our assumption, no measurable loss against larger blocks.
BLOCK = 256


def all_to_allv_batch(
    comm: Communication, sends: Iterable[np.ndarray], gpus_per_node: int | None = None
) -> np.ndarray:
    """``[comm.all_to_allv(s, gpus_per_node) for s in sends]`` as one array.

    ``sends`` is consumed ``BLOCK`` matrices at a time (a generator keeps only a block alive).
    """
    parts, tier, rest = [np.zeros(0)], -1, iter(sends)
    while block := list(itertools.islice(rest, BLOCK)):
        secs, block_tier = block_seconds(comm, block, gpus_per_node)
        parts.append(secs)
        tier = max(tier, block_tier)
    if tier >= 0:
        comm.note("all_to_allv", tier)
    return np.concatenate(parts)


def block_seconds(
    comm: Communication, sends: list[np.ndarray], gpus_per_node: int | None
) -> tuple[np.ndarray, int]:
    """Seconds of each matrix and the tier to note (-1: none, or already noted)."""
    shape = np.shape(sends[0])
    if len(shape) != 2 or shape[0] != shape[1] or any(np.shape(s) != shape for s in sends):
        return one_by_one(comm, sends, gpus_per_node), -1
    n = shape[0]
    gpn = comm.layout(n, gpus_per_node)
    model, inter_tier = comm.inter_a2a(n, gpn) if n > gpn else (None, -1)
    if not covered(comm, n, gpn, model):
        return one_by_one(comm, sends, gpus_per_node), -1
    block = np.asarray(sends, dtype=np.float64)
    if not np.all(np.isfinite(block)) or np.any(block < 0):
        raise InputError("send_bytes", "negative or non-finite", "bytes >= 0")
    secs, local_tier, active = stack_seconds(comm, block, gpn, model)
    return secs, max(local_tier, inter_tier) if active else -1


def one_by_one(comm: Communication, sends: list[np.ndarray], gpn: int | None) -> np.ndarray:
    return np.array([comm.all_to_allv(s, gpus_per_node=gpn) for s in sends], dtype=np.float64)


def covered(comm: Communication, n: int, gpn: int, model: InterNodeA2A | None) -> bool:
    """Whether the stacked form reproduces this layout (see the module docstring)."""
    f = comm.fabric
    bridged = f.intra_kind == "pcie" and f.pcie_switches > 1 and f.pcie_bridge_bw > 0
    if bridged or n == 1 or n % gpn:
        return False
    return model is None or (model.is_linear and len(model.leaves.tiers) <= 1)


def stack_seconds(
    comm: Communication, send: np.ndarray, gpn: int, model: InterNodeA2A | None
) -> tuple[np.ndarray, int, bool]:
    """Seconds of each ``[n, n]`` matrix of ``send``, the intra-node tier, any traffic."""
    s, n = send.shape[0], send.shape[1]
    off = send * (1.0 - np.eye(n))
    active = off.reshape(s, -1).any(axis=1)
    node = np.arange(n) // gpn
    same = node[:, None] == node[None, :]
    intra, inter = off * same, off * ~same
    v_intra = np.maximum(intra.sum(2).max(1), intra.sum(1).max(1))
    local, tier = comm.local_a2a(n, gpn, v_intra, np.zeros(s))
    seconds = local
    if model is not None:
        seconds = np.maximum(seconds, inter_seconds(model, inter, gpn))
    return np.where(active, seconds, 0.0), tier, bool(active.any())


def inter_seconds(model: InterNodeA2A, inter: np.ndarray, gpn: int) -> np.ndarray:
    """:meth:`InterNodeA2A.seconds` (linear curve, one leaf tier) of each matrix."""
    s, n = inter.shape[0], inter.shape[1]
    nz = inter > 0
    piece = model.curve.pieces[0]
    local = model.leaves.local(n) if model.leaves.split else None
    zero = np.zeros((s, n))
    send, recv, out, into = zero, zero, zero, zero
    # The same bottleneck classes as InterNodeA2A.linear_parts, one [n, n] mask each.
    for k, (mask, scale) in enumerate(model.classes(np.ones((n, n), dtype=bool), local)):
        m = inter if local is None else np.where(mask[None], inter, 0.0)
        hit = nz if local is None else nz & mask[None]
        rank_rate, node_rate = model.nic_bw * scale * piece.eta, model.node_bw * scale * piece.eta
        rows, cols = m.sum(2), m.sum(1)
        sent = piece.alpha_step * hit.sum(2) + rows / rank_rate
        got = piece.alpha_step * hit.sum(1) + cols / rank_rate
        if k:  # a spine bottleneck: the leaf's uplinks, shared by its ranks
            sent, got = model.leaves.leaf_mean(sent), model.leaves.leaf_mean(got)
        send, recv = np.maximum(send, sent), np.maximum(recv, got)
        if not k:  # the node's NICs; its spine share is the leaf's (above)
            out, into = zero + rows / node_rate, zero + cols / node_rate
    busiest = np.maximum(send.max(1), recv.max(1))
    busiest = np.maximum(busiest, per_node(out, gpn).max(1))
    busiest = np.maximum(busiest, per_node(into, gpn).max(1))
    return np.where(nz.reshape(s, -1).any(axis=1), model.once + busiest, 0.0)


def per_node(rank_values: np.ndarray, gpn: int) -> np.ndarray:
    """``[S, nodes]`` sums of consecutive ranks, added in rank order as bincount adds."""
    by_node = rank_values.reshape(rank_values.shape[0], -1, gpn)
    total = 0.0 + by_node[:, :, 0]
    for k in range(1, gpn):
        total = total + by_node[:, :, k]
    return total
