"""All-to-all(v) matrices of one layout priced as a ``[S, n, n]`` stack: the one implementation.

A training step prices four all-to-all(v) matrices per attention slot: 2,288 calls at 16k GPUs
and 16,384 at 131k. :meth:`Communication.all_to_allv` prices one matrix as a stack of one, and
:func:`all_to_allv_batch` many at once, with the same operations: the intra-node part (the
busiest rank's NVLink or PCIe volume, the busiest PCIe switch uplink) through
:meth:`Communication.local_a2a`, the cross-node part through
:meth:`~libra_des.hardware.collectives.alltoall.InterNodeA2A.stack`. Each matrix's result does not
depend
on which other matrices share its stack.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

import numpy as np

from libra_des.errors import InputError

if TYPE_CHECKING:
    from libra_des.hardware.collectives.alltoall import InterNodeA2A
    from libra_des.hardware.fabric.rates import Fabric


class Communication(Protocol):
    """What pricing a stack reads of
    :class:`~libra_des.hardware.collectives.communication.Communication` (which imports this
    module, so it is named here by its shape)."""

    fabric: Fabric

    def layout(self, group: int, gpus_per_node: int | None) -> int: ...

    def local_a2a(
        self, n: int, gpn: int, v_intra: np.ndarray, v_bridge: np.ndarray
    ) -> tuple[np.ndarray, int]: ...

    def inter_a2a(self, n: int, gpn: int) -> tuple[InterNodeA2A, int]: ...

    def note(self, op: str, tier: int) -> None: ...

#: Matrices priced together: 64 x 64 x 64 float64 temporaries (2 MiB) stay in cache and in
#: the allocator's heap, where 256 a block made fresh 8 MiB mappings every call (measured on
#: ``scale-16384``'s stacks: 64 a block is the fastest; benchmarks/README.md, "The closing
#: round").
BLOCK = 64


def all_to_allv_batch(
    comm: Communication, sends: Iterable[np.ndarray], gpus_per_node: int | None = None
) -> np.ndarray:
    """``[comm.all_to_allv(s, gpus_per_node) for s in sends]`` as one array.

    ``sends`` is consumed ``BLOCK`` matrices at a time (a generator keeps only a block alive).
    """
    parts, tier, rest = [np.zeros(0)], -1, iter(sends)
    while block := list(itertools.islice(rest, BLOCK)):
        shape = np.shape(block[0])
        if any(np.shape(s) != shape for s in block):  # mixed sizes: one stack per matrix
            priced = [stack_seconds(comm, checked(s), gpus_per_node) for s in block]
            secs = np.concatenate([p[0] for p in priced])
            block_tier = max(p[1] for p in priced)
        else:
            secs, block_tier = stack_seconds(comm, checked(block), gpus_per_node)
        parts.append(secs)
        tier = max(tier, block_tier)
    if tier >= 0:
        comm.note("all_to_allv", tier)
    return np.concatenate(parts)


def checked(sends: np.ndarray | list[np.ndarray]) -> np.ndarray:
    """A ``[S, n, n]`` float stack of finite, non-negative bytes (a single matrix: S = 1)."""
    block = np.asarray(sends, dtype=np.float64)
    if block.ndim == 2:
        block = block[None]
    if block.ndim != 3 or block.shape[1] != block.shape[2]:
        raise InputError("send_bytes", block.shape[1:], "a square [n, n] matrix")
    if not np.all(np.isfinite(block)) or np.any(block < 0):
        raise InputError("send_bytes", "negative or non-finite", "bytes >= 0")
    return block


def stack_seconds(
    comm: Communication, send: np.ndarray, gpus_per_node: int | None
) -> tuple[np.ndarray, int]:
    """Seconds of each ``[n, n]`` matrix of ``send`` and the tier to note (-1: no traffic)."""
    from libra_des.hardware.collectives.a2a_kernel import (
        pair_sums,  # numba only where a2a is priced
    )

    s, n = send.shape[0], send.shape[1]
    if n == 1:
        return np.zeros(s), -1
    gpn = comm.layout(n, gpus_per_node)
    node = np.arange(n) // gpn
    same = (node[:, None] == node[None, :]) & ~np.eye(n, dtype=bool)
    rows, cols, msgs, _, _ = pair_sums(send, np.where(same, 0, -1), 1, -1.0, 1.0,
                                       np.zeros(0, dtype=np.int64), 0)
    active = msgs[0].any(axis=1)
    v_intra = np.maximum(rows[0].max(1), cols[0].max(1))
    seconds, tier = comm.local_a2a(n, gpn, v_intra, bridge_volume(comm, send, same, gpn))
    if n > gpn:
        model, inter_tier = comm.inter_a2a(n, gpn)
        inter = model.stack(send, gpn)
        seconds = np.maximum(seconds, inter)
        active |= inter > 0
        tier = max(tier, inter_tier)
    if not active.any():
        return np.zeros(s), -1
    return np.where(active, seconds, 0.0), tier


def bridge_volume(comm: Communication, send: np.ndarray, same: np.ndarray, gpn: int
                  ) -> np.ndarray:
    """Per matrix, the bytes the busiest PCIe switch uplink carries of the pairs ``same``
    (one node, off the diagonal; 0 on NVSwitch or one switch): the GPUs of a node are
    spread evenly over its switches."""
    f = comm.fabric
    s, n = send.shape[0], send.shape[1]
    if f.intra_kind != "pcie" or f.pcie_switches <= 1 or f.pcie_bridge_bw <= 0:
        return np.zeros(s)
    intra = send * same
    per_switch = -(-f.gpus_per_node // f.pcie_switches)
    rank = np.arange(n)
    sw = (rank % gpn) // per_switch + (rank // gpn) * f.pcie_switches
    cross = intra * (sw[:, None] != sw[None, :])
    starts = np.flatnonzero(np.r_[True, sw[1:] != sw[:-1]])  # switches hold consecutive ranks
    out = np.add.reduceat(cross.sum(2), starts, axis=1)
    into = np.add.reduceat(cross.sum(1), starts, axis=1)
    result: np.ndarray = np.maximum(out.max(1), into.max(1))
    return result
