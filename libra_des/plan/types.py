"""Plan records shared between the planners and the simulations.

An :class:`AttentionPlan` is what the simulator needs to execute one group's core attention
(a Libra pool, a DistCA pool, or a single Ulysses CP group) for one packed-sequence slot:
per-worker work, per-pair bytes and the Pipeliner's chunk count. It is data only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PairBytes:
    """A ``[W, W]`` matrix of bytes between worker pairs, stored by its nonzero entries.

    TAP's exchange matrices are sparse (measured on scale-4096: 10.4% of the entries nonzero
    on average, 14.8% at most): a step at 131k GPUs holds 4,096 pools of 64 workers, two
    matrices each, 256 MiB dense. :meth:`dense` gives back the very matrix stored (zeros,
    here +0.0, where nothing was stored), so every sum over it is the same bit for bit.
    """

    workers: int
    flat: np.ndarray  # positions s * W + d of the nonzero entries, ascending
    values: np.ndarray  # their bytes (float64)

    @staticmethod
    def of(matrix: np.ndarray) -> PairBytes:
        dense = np.asarray(matrix, dtype=np.float64)
        if dense.ndim != 2 or dense.shape[0] != dense.shape[1]:
            raise ValueError(f"a square byte matrix, got shape {dense.shape}")
        flat = np.flatnonzero(dense)
        index = flat.astype(np.int32) if dense.size < 2**31 else flat
        return PairBytes(dense.shape[0], index, dense.ravel()[flat])

    def dense(self) -> np.ndarray:
        out = np.zeros(self.workers * self.workers)
        out[self.flat] = self.values
        return out.reshape(self.workers, self.workers)

    def sent(self) -> np.ndarray:
        """``[W]`` bytes each worker sends (the dense matrix's row sums), from the stored
        entries alone, added in entry order: the dense sums exactly where the bytes are whole
        numbers (TAP's and DistCA's exchanges), else within rounding (Ulysses' per-rank
        shares at a CP degree that is not a power of two: about 1e-16 relative)."""
        return np.bincount(self.flat // self.workers, self.values, minlength=self.workers)

    def received(self) -> np.ndarray:
        """``[W]`` bytes each worker receives (the column sums, which numpy also adds in
        row order: the same floats)."""
        return np.bincount(self.flat % self.workers, self.values, minlength=self.workers)


@dataclass(frozen=True)
class AttentionPlan:
    """Core-attention work and traffic of one group of ``W`` workers, for one forward pass.

    ``worker_pairs[w]``: causal (query, key) pairs times query heads that worker ``w``
    computes ("pair-heads"; forward FLOPs = 4 * head_dim * pair-heads).
    ``worker_doc_len[w]``: pair-weighted mean document length of that work (FlashAttention
    efficiency depends on it).
    ``worker_heads[w]``: query heads per kernel call on that worker.
    ``dispatch_bytes[s, d]``: bytes worker ``s`` sends to ``d`` before compute (K/V, Q);
    stored sparse as ``dispatch`` (see :class:`PairBytes`).
    ``return_bytes[s, d]``: bytes ``s`` sends to ``d`` after compute (outputs O); ``returns``.
    ``chunks``: Pipeliner chunk count M (1 means no overlap).
    ``swaps_qkv``: each worker swaps its own token-split Q, K, V for the head-split copy it
    receives (Ulysses' all-to-all), so what it received is no extra memory; a plan that
    keeps its own Q, K, V beside the remote ones (TAP) leaves it False.
    ``worker_query_len``/``worker_key_len``: pair-weighted mean queries and keys of the
    document chunks a worker's call runs, where it runs chunks that see their document's
    prefix (WLB-LLM's CP shards); None: whole documents of ``worker_doc_len`` (the kernel
    model's efficiency follows the chunk's shape, see ``CostModel.attention``).
    ``sharding``: how a CP planner cut the group's documents ("" where it has no choice).
    """

    policy: str
    worker_pairs: np.ndarray
    worker_doc_len: np.ndarray
    worker_heads: np.ndarray
    dispatch: PairBytes
    returns: PairBytes
    chunks: int = 1
    tiles: int = 0
    swaps_qkv: bool = False
    worker_query_len: np.ndarray | None = None
    worker_key_len: np.ndarray | None = None
    sharding: str = ""

    @property
    def dispatch_bytes(self) -> np.ndarray:
        return self.dispatch.dense()

    @property
    def return_bytes(self) -> np.ndarray:
        return self.returns.dense()

    @property
    def workers(self) -> int:
        return int(self.worker_pairs.shape[0])

    @property
    def total_pairs(self) -> float:
        return float(self.worker_pairs.sum())

    @property
    def total_bytes(self) -> float:
        return float(self.dispatch_bytes.sum() + self.return_bytes.sum())

    @property
    def imbalance(self) -> float:
        """max worker load / mean worker load - 1."""
        mean = float(self.worker_pairs.mean())
        return float(self.worker_pairs.max()) / mean - 1.0 if mean > 0 else 0.0

    @property
    def held_remote_bytes(self) -> float:
        """Largest worker's extra attention buffers of one layer (see ``sim/training/memory.py``).

        What it received before compute plus the outputs it computed for other workers.
        Ulysses (and WLB-LLM, which runs it) swaps its token-split Q, K, V for the head-split
        copy it receives (the QKV projection's backward does not need its output), so only
        its head-split O is extra; TAP keeps the worker's own Q, K, V beside the remote ones.
        """
        computed_for_others = self.returns.sent()
        if computed_for_others.size == 0:
            return 0.0
        received = 0.0 if self.swaps_qkv else self.dispatch.received()
        return float((received + computed_for_others).max())
