"""The cost model the simulations ask: how long a kernel, a transfer or a collective takes.

``CostModel(profile, fabric)`` answers from a calibration profile (fitted curves where it has
them, datasheet numbers where it does not) on a :class:`~libra_des.hardware.fabric.rates.Fabric`.
Kernel models live in :mod:`libra_des.hardware.compute.kernels`, collective algorithms in
:mod:`libra_des.hardware.collectives.curves` and
:mod:`libra_des.hardware.collectives.communication`.

``efficiency=False`` switches every fitted communication efficiency off: collectives then
follow the pure alpha-beta closed forms on the fabric's link rates and hop latencies (ring
all_reduce: ``2(n-1) alpha + 2(n-1)/n S/B``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from libra_des.errors import InputError
from libra_des.hardware.collectives.communication import CollectiveCost, Communication
from libra_des.hardware.collectives.nccl_tuner import NO_OVERRIDES, Overrides
from libra_des.hardware.compute.grouped_kernels import GroupedKernel
from libra_des.hardware.compute.kernels import (
    BLOCK_M_LARGE,
    BLOCK_M_SMALL,
    BORROWED_GROUPED,
    GROUPED_BLOCK_N,
    AttentionParams,
    GemmParams,
    GroupedGemmParams,
    attention_call,
    attention_work,
    cp_shard,
    gemm_body,
    grouped_gemm_time,
    grouped_seconds,
    grouped_shape,
    grouped_shapes,
    shard_pairs,
    sm_count,
)
from libra_des.hardware.compute.tiles import tile_geometry
from libra_des.hardware.fabric.rates import Fabric
from libra_des.hardware.profiles.profile import DTYPE_BYTES, Profile

__all__ = ["CollectiveCost", "CostModel", "comm_overrides"]


def comm_overrides(scenario: Any) -> Overrides:
    """A scenario's ``comm.algorithm`` and ``comm.protocol`` (None, None without a section)."""
    comm = getattr(scenario, "comm", None)
    return (comm.algorithm, comm.protocol) if comm is not None else (None, None)


class CostModel(Communication):
    """Kernel, collective and transfer times for one device profile on one fabric.

    Collectives (``collective``, ``all_to_allv``, ``p2p``) come from
    :class:`~libra_des.hardware.collectives.communication.Communication`; kernels are defined here.
    """

    def __init__(self, profile: Profile, fabric: Fabric, efficiency: bool = True,
                 comm: Overrides = NO_OVERRIDES) -> None:
        super().__init__(profile, fabric, efficiency, comm)
        base = AttentionParams.from_kernels(profile.kernels)
        fit = next((f for f in profile.fits if f.op == "attention"), None)
        self.attn = AttentionParams.from_dict(fit.params, base) if fit else base
        self.gemm_params = {
            f.dtype or "bf16": GemmParams.from_dict(f.params)
            for f in profile.fits
            if f.op == "gemm"
        }
        self.gemm_default = GemmParams.from_kernels(profile.kernels)
        self.grouped_params = {
            f.dtype or "bf16": GroupedGemmParams.from_dict(f.params)
            for f in profile.fits
            if f.op == "grouped_gemm"
        }
        self.sms = sm_count(profile.device)

    # ------------------------------------------------------------------ attention
    def attention(
        self,
        pairs: Any,
        doc_len: Any,
        heads_q: Any,
        heads_kv: Any,
        head_dim: int,
        backward: bool = False,
        shard: tuple[Any, Any] | None = None,
    ) -> np.ndarray:
        """Seconds of one varlen causal attention call per element (vectorised).

        ``pairs``: exact causal (query, key) pairs of the call (per head); ``doc_len``: the
        pair-weighted mean length of the documents they come from. The call is treated as
        ``pairs / (L (L+1) / 2)`` whole causal documents of length ``L``. Forward FLOPs are
        ``4 * head_dim * pairs * heads_q``. Zero pairs cost nothing (no call).
        ``shard``: (queries, keys) of the call's average chunk where the call runs document
        chunks rather than whole documents (per-document CP shards: a chunk's queries see
        its document's prefix); the call is then ``pairs / shard_pairs(q, k)`` such chunks.
        """
        p, length, hq = np.broadcast_arrays(
            np.asarray(pairs, dtype=np.float64),
            np.asarray(doc_len, dtype=np.float64),
            np.asarray(heads_q, dtype=np.float64),
        )
        check_heads(hq, heads_kv, head_dim)
        if np.any(p < 0) or np.any(length < 0) or not np.all(np.isfinite(p)):
            raise InputError("pairs", "negative or non-finite", "pairs >= 0, doc_len >= 0")
        busy = (p > 0) & (length > 0)
        length = np.where(busy, length, 1.0)
        if shard is None:
            q = k = length
            docs = p / (length * (length + 1) / 2)
        else:
            q, k = (np.where(busy, np.broadcast_to(np.asarray(x, np.float64), p.shape), 1.0)
                    for x in shard)
            docs = p / shard_pairs(q, k)
        peak = self.profile.peak_flops("bf16")
        work = docs * attention_work(self.attn, peak, q, k, head_dim, backward)
        rows = docs * tile_geometry(q, k, self.attn.block_m, self.attn.block_n)[0]
        out = attention_call(self.attn, hq * work, hq, rows)
        return np.where(busy, out, 0.0)

    def attention_docs(
        self,
        doc_lengths: Any,
        heads_q: int,
        heads_kv: int,
        head_dim: int,
        backward: bool = False,
        cp: int = 1,
    ) -> float:
        """Seconds of one varlen causal call over ``doc_lengths`` (each its CP shard)."""
        lens = np.asarray(doc_lengths, dtype=np.float64).ravel()
        check_heads(np.asarray(float(heads_q)), heads_kv, head_dim)
        if not isinstance(cp, int | np.integer) or cp < 1:
            raise InputError("cp", cp, "a positive integer")
        if np.any(lens < 0) or not np.all(np.isfinite(lens)):
            raise InputError("doc_lengths", "negative or non-finite", "token counts >= 0")
        lens = lens[lens > 0]
        if lens.size == 0:
            return 0.0
        q, k = cp_shard(lens, int(cp))
        peak = self.profile.peak_flops("bf16")
        work = float(attention_work(self.attn, peak, q, k, head_dim, backward).sum())
        rows = float(tile_geometry(q, k, self.attn.block_m, self.attn.block_n)[0].sum())
        return float(
            attention_call(self.attn, np.asarray(heads_q * work), np.asarray(heads_q), rows)
        )

    # ------------------------------------------------------------------ dense compute
    def gemm_for(self, dtype: str) -> tuple[GemmParams, float, int]:
        peak = self.profile.peak_flops(dtype)
        return self.gemm_params.get(dtype, self.gemm_default), peak, DTYPE_BYTES[dtype]

    def gemm(self, m: Any, n: int, k: int, dtype: str = "bf16") -> np.ndarray:
        """Seconds of ``[m, k] x [k, n]`` GEMMs (vectorised over ``m``; 0 where m == 0)."""
        params, peak, nbytes = self.gemm_for(dtype)
        rows = np.asarray(m, dtype=np.float64)
        check_dims(rows, n, k)
        body = gemm_body(params, peak, self.profile.hbm_bw, rows, n, k, nbytes)
        return np.where(rows > 0, params.launch_s + body, 0.0)

    def grouped_gemm(self, tokens_per_expert: Any, n: int, k: int, dtype: str = "bf16") -> float:
        """One grouped-GEMM launch over experts (the tile model of
        :func:`~libra_des.hardware.compute.kernels.grouped_seconds`): rows padded to the M tile,
        waves
        of tiles over the SMs, every active expert's weights read. Experts with no tokens are
        skipped; the profile's fit for ``dtype`` when it has one, else the borrowed constants."""
        rows = np.asarray(tokens_per_expert, dtype=np.float64).ravel()
        check_dims(rows, n, k)
        nbytes = DTYPE_BYTES.get(dtype, 2)
        shape = grouped_shape(rows, n, k, nbytes)
        if shape.tiles <= 0:
            return 0.0
        peak = self.profile.peak_flops(dtype)
        return grouped_gemm_time(self.grouped_for(dtype), peak, self.profile.hbm_bw, self.sms,
                                 shape, k)

    def grouped_gemm_rows(
        self, tokens_per_expert: np.ndarray, n: int, k: int, dtype: str = "bf16",
        kernel: GroupedKernel | None = None,
    ) -> np.ndarray:
        """:meth:`grouped_gemm` of every row of ``tokens_per_expert`` [launches, experts] (one
        vectorised evaluation; each entry equals the single launch's seconds). ``kernel``: a
        named kernel's geometry and constants (``hardware/compute/grouped_kernels.py``) where the
        profile holds no fit of its own for ``dtype``."""
        rows = np.asarray(tokens_per_expert, dtype=np.float64)
        check_dims(rows, n, k)
        blocks: tuple[int, ...] = (BLOCK_M_SMALL, BLOCK_M_LARGE)
        if kernel is None or dtype in self.grouped_params:
            params, block_n = self.grouped_for(dtype), GROUPED_BLOCK_N
        else:
            params, blocks, block_n = kernel.params, kernel.blocks, kernel.block_n
        tiles, block_m, moved = grouped_shapes(rows, n, k, DTYPE_BYTES.get(dtype, 2), blocks,
                                               block_n)
        seconds = grouped_seconds(params, self.profile.peak_flops(dtype), self.profile.hbm_bw,
                                  self.sms, tiles, block_m, moved, np.full(tiles.shape, k),
                                  block_n)
        return np.where(tiles > 0, seconds, 0.0)

    def grouped_for(self, dtype: str) -> GroupedGemmParams:
        return self.grouped_params.get(dtype) or GroupedGemmParams.from_dict(BORROWED_GROUPED)

    def gemm_tier(self, dtype: str = "bf16") -> str:
        """``measured`` when the profile holds a GEMM fit for ``dtype``, else ``datasheet``
        (the roofline on the profile's peak and its default efficiencies)."""
        return "measured" if dtype in self.gemm_params else "datasheet"

    def attention_tier(self) -> str:
        """``measured`` when the profile holds an attention fit, else ``datasheet``."""
        return "measured" if any(f.op == "attention" for f in self.profile.fits) else "datasheet"

    def grouped_provenance(self, dtype: str = "bf16") -> str:
        """``measured`` when the profile holds a grouped-GEMM fit for ``dtype``, else
        ``borrowed`` (constants fitted on another device's public table)."""
        return "measured" if dtype in self.grouped_params else "borrowed"

    def elementwise(self, nbytes: Any) -> np.ndarray:
        """Seconds of memory-bound element-wise ops moving ``nbytes`` (read + write)."""
        size = np.asarray(nbytes, dtype=np.float64)
        if np.any(size < 0) or not np.all(np.isfinite(size)):
            raise InputError("nbytes", "negative or non-finite", "bytes >= 0")
        k = self.profile.kernels
        rate = self.profile.hbm_bw * k.elementwise_efficiency.value
        return np.where(size > 0, k.launch_s.value + size / rate, 0.0)


def check_heads(heads_q: np.ndarray, heads_kv: Any, head_dim: int) -> None:
    if np.any(heads_q <= 0):
        raise InputError("heads_q", "non-positive", "query heads > 0")
    if np.any(np.asarray(heads_kv) <= 0):
        raise InputError("heads_kv", heads_kv, "KV heads > 0")
    if not head_dim or head_dim <= 0 or not math.isfinite(head_dim):
        raise InputError("head_dim", head_dim, "a positive head dimension")


def check_dims(m: np.ndarray, n: int, k: int) -> None:
    if np.any(m < 0) or not np.all(np.isfinite(m)):
        raise InputError("m", "negative or non-finite", "rows >= 0")
    for name, value in (("n", n), ("k", k)):
        if not value or value <= 0:
            raise InputError(name, value, "a positive dimension")
