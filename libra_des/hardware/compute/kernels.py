"""Closed-form kernel time models: FlashAttention tiles, roofline GEMMs, element-wise ops.

Attention (varlen, causal, FlashAttention-style). Each query head of each document runs one
CTA per block of ``block_m`` query rows; a CTA walks key blocks of ``block_n`` up to its causal
limit (bottom-right aligned when a shard has fewer queries than keys). Time of one call:

    launch + (1 + heads_half / h) * h * sum_docs(cells * 4 d / (peak * eff) + cta_s * rows)

``cells`` counts the (padded) query x key tile area computed, so short documents waste most of
each tile (efficiency falls steeply below ~``block_m`` tokens) and pay a fixed ``cta_s`` per
CTA; ``1 + heads_half / h`` is a mild penalty for calls with few heads (fewer CTAs to fill the
GPU), scaled down for calls with more CTAs per head than the measured ones (see
:func:`attention_call`). Tile edges are rounded smoothly (half a block on average) so time
is continuous in the document length. KV heads do not enter: FlashAttention-2 launches one CTA
per *query* head, GQA saves K/V memory, not FLOPs. Backward: ``bwd_flops`` (2.5) times the
forward work at efficiency ``eff * bwd_ratio``.

GEMM: ``launch + max(F * (1 + (half / F)**gamma) / (peak * eff), bytes / hbm)``, a roofline
whose compute efficiency ``eff / (1 + (half / F)**gamma)`` saturates with size; ``gamma <= 1``
keeps time non-decreasing in every dimension.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields

import numpy as np

from libra_des.base.kernel import Floats
from libra_des.hardware.compute.tiles import BLOCK_M, BLOCK_N, tile_geometry
from libra_des.hardware.gpu_records import device_record
from libra_des.hardware.profiles.profile import Kernels


def constants(k: Kernels, names: Mapping[str, str]) -> dict[str, float]:
    """Parameter name -> value of the profile's kernel constant it comes from."""
    return {param: float(getattr(k, field).value) for param, field in names.items()}


@dataclass(frozen=True)
class AttentionParams:
    efficiency: float
    cta_s: float
    heads_half: float
    launch_s: float
    bwd_ratio: float
    bwd_flops: float
    block_m: float = BLOCK_M
    block_n: float = BLOCK_N

    @classmethod
    def from_kernels(cls, k: Kernels) -> AttentionParams:
        names = ("efficiency", "cta_s", "heads_half", "launch_s", "bwd_ratio", "bwd_flops")
        return cls(**constants(k, {n: f"attention_{n}" for n in names}))

    @classmethod
    def from_dict(cls, params: Mapping[str, float], base: AttentionParams) -> AttentionParams:
        """Fitted values override ``base`` (the profile's kernel constants)."""
        names = {f.name for f in fields(cls)}
        return cls(**{**asdict(base), **{k: v for k, v in params.items() if k in names}})

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def attention_work(
    p: AttentionParams,
    peak: float,
    q: np.ndarray,
    k: np.ndarray,
    head_dim: float | np.ndarray,
    backward: bool,
) -> np.ndarray:
    """Seconds of GPU work per document per head (before launch and the heads penalty)."""
    rows, cells = tile_geometry(q, k, p.block_m, p.block_n)
    eff = p.efficiency * (p.bwd_ratio if backward else 1.0)
    work = cells * 4.0 * head_dim / (peak * eff) + p.cta_s * rows
    return work * (p.bwd_flops if backward else 1.0)


#: CTAs per head of the calls the heads penalty was fitted on: the H100 table's calls hold
#: 32,768 tokens, i.e. 256 query-row blocks of 128 per head.
FITTED_ROWS = 256.0


def attention_call(
    p: AttentionParams,
    work_heads: Floats,
    heads: Floats | float,
    rows: Floats | float | None = None,
) -> Floats:
    """One call's seconds from its summed per-head work and its query heads.

    The few-heads penalty ``heads_half / h`` exists because a call with few heads launches
    few CTAs and leaves SMs idle. ``rows`` (CTAs per head in the call) scales it down for calls
    with more CTAs per head than the measured ones (``FITTED_ROWS``), e.g. a 1M-token shard
    with 4 heads fills the GPU as well as 32K tokens with 32 heads. Inside the measured range
    (``rows <= FITTED_ROWS``, or ``rows`` omitted) the fitted penalty applies unchanged.
    """
    h = np.maximum(np.asarray(heads, dtype=np.float64), 1e-12)
    fill = 1.0 if rows is None else np.minimum(1.0, FITTED_ROWS / np.maximum(rows, 1.0))
    return p.launch_s + (1.0 + fill * p.heads_half / h) * work_heads


def cp_shard(lengths: np.ndarray, cp: int) -> tuple[Floats, Floats]:
    """Queries and keys of each document's average causal CP shard: ``len/cp`` queries
    against ``(1/2 + 1/(2 cp)) len`` keys (``cp = 1``: the whole causal document)."""
    lens = np.asarray(lengths, dtype=np.float64)
    return lens / cp, (0.5 + 0.5 / cp) * lens


def shard_pairs(q: Floats, k: Floats) -> Floats:
    """Exact causal (query, key) pairs with bottom-right alignment: ``q(k-q) + q(q+1)/2``."""
    return q * (k - q) + q * (q + 1) / 2


@dataclass(frozen=True)
class GemmParams:
    efficiency: float
    half_flops: float
    gamma: float
    launch_s: float

    @classmethod
    def from_kernels(cls, k: Kernels) -> GemmParams:
        names = {n: f"gemm_{n}" for n in ("efficiency", "half_flops", "gamma")}
        return cls(**constants(k, {**names, "launch_s": "launch_s"}))

    @classmethod
    def from_dict(cls, params: Mapping[str, float]) -> GemmParams:
        return cls(**{f.name: float(params[f.name]) for f in fields(cls)})

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def gemm_body(
    p: GemmParams,
    peak: float,
    hbm: float,
    m: np.ndarray,
    n: float | np.ndarray,
    k: float | np.ndarray,
    dtype_bytes: int,
) -> np.ndarray:
    """Roofline seconds of ``[m, k] x [k, n]`` GEMMs without the launch (0 where m == 0)."""
    m = np.asarray(m, dtype=np.float64)
    flops = 2.0 * m * n * k
    slow = np.power(p.half_flops, p.gamma) * np.power(flops, 1.0 - p.gamma)
    compute = (flops + slow) / (peak * p.efficiency)
    traffic = dtype_bytes * (m * k + k * n + m * n) / hbm
    return np.where(m > 0, np.maximum(compute, traffic), 0.0)


# ----------------------------------------------------------------------------- grouped GEMM

#: Rows of one CTA tile. Hopper's warpgroup MMA computes 64 rows per warpgroup, so grouped
#: kernels (DeepGEMM, CUTLASS SM90 grouped GEMM) tile M by 64 when no expert has more than 64
#: rows and by 128 otherwise (DeepGEMM's README and launch heuristics; our reading of them).
BLOCK_M_SMALL = 64
BLOCK_M_LARGE = 128
#: Output columns per tile (assumption: the common 128-wide N tile of those kernels).
GROUPED_BLOCK_N = 128
#: Output element size: fp8 GEMMs write bf16 (DeepGEMM's ``*_bf16_nt`` kernels, SGLang MoE).
MIN_OUT_BYTES = 2


def sm_count(device: str) -> int:
    """SMs of ``device`` by its GPU record (the assumed device's when none names it). A
    grouped GEMM's tiles run in waves over these."""
    return device_record(device).sm_count.value


@dataclass(frozen=True)
class GroupedGemmParams:
    """Tile model of one grouped-GEMM launch over experts (see :func:`grouped_gemm_time`).

    ``efficiency``: share of an SM's peak one tile's MMAs reach; ``tile_s``: fixed cost per
    tile (prologue, pipeline fill, epilogue store); ``mem_eff``: share of HBM bandwidth the
    launch streams at (<= 1, so time never beats reading the weights at full bandwidth);
    ``launch_s``: launch and scheduling gap; ``overlap``: the p-norm combining MMA and HBM
    time (1: no overlap, their sum; large: perfect overlap, their maximum).
    """

    efficiency: float
    tile_s: float
    mem_eff: float
    launch_s: float
    overlap: float

    @classmethod
    def from_dict(cls, params: Mapping[str, float]) -> GroupedGemmParams:
        return cls(**{f.name: float(params[f.name]) for f in fields(cls)})

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


#: Grouped-GEMM constants used where a profile has no ``grouped_gemm`` fit for a dtype
#: (``borrowed``): the fit of the public DeepGEMM H800 FP8 table
#: (``calibration/public/grouped_gemm_h800_fp8_deepgemm.csv``; ``profile import --format
#: grouped-gemm-csv ... --cv``: leave-one-size-out median error 3%), rounded. Efficiencies are
#: shares of the dtype's own peak and bandwidth, so applying them to BF16 or to another Hopper
#: part is our assumption (checked against the BF16 H100/H200 rows in ``docs/moe.md``).
BORROWED_GROUPED = {
    "efficiency": 0.73, "tile_s": 1.8e-6, "mem_eff": 0.86, "launch_s": 1.9e-6, "overlap": 2.9,
}
BORROWED_SOURCE = "DeepGEMM H800 FP8 table fit (calibration/public), as shares of peak"


@dataclass(frozen=True)
class GroupedShape:
    """One launch's work: CTA tiles, rows per tile, and bytes it must move."""

    tiles: float
    block_m: float
    weight_bytes: float
    bytes: float


def grouped_shape(rows: np.ndarray, n: float, k: float, dtype_bytes: int) -> GroupedShape:
    """Tiles and bytes of ``[rows_e, k] x [k, n]`` for every expert ``e`` with rows > 0.

    Each active expert's rows are padded to the M tile; every active expert's ``[k, n]``
    weights are read once; activations are read and outputs written once.
    """
    m = np.asarray(rows, dtype=np.float64)
    m = m[m > 0]
    if m.size == 0:
        return GroupedShape(0.0, BLOCK_M_SMALL, 0.0, 0.0)
    block_m = BLOCK_M_SMALL if m.max() <= BLOCK_M_SMALL else BLOCK_M_LARGE
    n_tiles = math.ceil(n / GROUPED_BLOCK_N)
    tiles = float(np.ceil(m / block_m).sum() * n_tiles)
    weights = m.size * k * n * dtype_bytes
    moved = weights + float(m.sum()) * (k * dtype_bytes + n * max(dtype_bytes, MIN_OUT_BYTES))
    return GroupedShape(tiles, block_m, float(weights), float(moved))


def grouped_shapes(
    rows: np.ndarray, n: float, k: float, dtype_bytes: int,
    blocks: tuple[int, ...] = (BLOCK_M_SMALL, BLOCK_M_LARGE), block_n: int = GROUPED_BLOCK_N,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tiles, block_m, bytes) of :func:`grouped_shape` for every row of ``rows`` [launches,
    experts] at once. Tile and row counts are whole numbers, exact in float64 in any order
    of summation, so each launch's figures equal :func:`grouped_shape`'s bit for bit.

    ``blocks``: the kernel's M tile heights, smallest first; a launch uses the smallest that
    holds its largest expert (the largest when none does). ``block_n``: its N tile width.
    The defaults are the Hopper CUTLASS / DeepGEMM geometry of :func:`grouped_shape`."""
    m = np.asarray(rows, dtype=np.float64)
    largest = m.max(axis=1, initial=0.0)
    block_m = np.full(largest.shape, float(blocks[-1]))
    for b in reversed(blocks[:-1]):
        block_m = np.where(largest <= b, float(b), block_m)
    n_tiles = math.ceil(n / block_n)
    tiles = np.ceil(m / block_m[:, None]).sum(axis=1) * n_tiles
    weights = ((m > 0).sum(axis=1) * k * n * dtype_bytes).astype(np.float64)
    moved = weights + m.sum(axis=1) * (k * dtype_bytes + n * max(dtype_bytes, MIN_OUT_BYTES))
    return tiles, block_m, moved


def grouped_gemm_time(
    p: GroupedGemmParams,
    peak: float,
    hbm: float,
    sms: int,
    shape: GroupedShape,
    k: float,
) -> float:
    """Seconds of one grouped-GEMM launch (0 when no expert has rows); see
    :func:`grouped_seconds`."""
    if shape.tiles <= 0:
        return 0.0
    return float(
        grouped_seconds(p, peak, hbm, sms, np.array([shape.tiles]), np.array([shape.block_m]),
                        np.array([shape.bytes]), np.array([k]))[0]
    )


def grouped_seconds(
    p: GroupedGemmParams,
    peak: float,
    hbm: float,
    sms: int,
    tiles: np.ndarray,
    block_m: np.ndarray,
    nbytes: np.ndarray,
    k: np.ndarray,
    block_n: int = GROUPED_BLOCK_N,
) -> np.ndarray:
    """``launch + ||(waves * tile MMA time + ceil(waves) * tile_s, bytes / (hbm * mem_eff))||_p``
    per launch, with ``waves = ceil(tiles / SMs)`` (fractional below one wave).

    A hot expert adds tiles (its rows padded to the M tile), a tile count just past a multiple
    of the SM count costs a whole extra wave, and at small M the weight reads set the floor.
    Every term is non-decreasing in every expert's rows.
    """
    per_tile = 2.0 * block_m * block_n * k / (peak / sms * p.efficiency)
    waves = tiles / sms
    # A first wave with fewer tiles than SMs is spread over more SMs with narrower N tiles
    # (DeepGEMM's unaligned block sizes); from one full wave on, a partial wave costs a whole.
    waves = np.where(waves < 1.0, waves, np.ceil(waves))
    compute = waves * per_tile + np.ceil(waves) * p.tile_s
    memory = nbytes / (hbm * p.mem_eff)
    # Compute and HBM streams overlap imperfectly: a p-norm between max (overlap) and sum.
    both = np.power(np.power(compute, p.overlap) + np.power(memory, p.overlap), 1.0 / p.overlap)
    return np.asarray(p.launch_s + both)
