"""What one ``--sizes`` choice measures on one kind of device (no torch needed here)."""

from __future__ import annotations

from dataclasses import dataclass

KERNEL_OPS = ("attention", "gemm", "grouped_gemm")
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")
ALL_OPS = KERNEL_OPS + COLLECTIVES
SOURCE = "libra-des calibration harness"
#: CUDA events resolve about 0.5 us; a repeat reading zero is below the clock, not free.
CLOCK_FLOOR_S = 5e-7
KIB, MIB = 1 << 10, 1 << 20


@dataclass(frozen=True)
class Sizes:
    """What one ``--sizes`` choice measures on one kind of device."""

    attn_tokens: int  # tokens per attention call (all documents together)
    attn_lengths: tuple[int, ...]  # uniform-mix document lengths
    attn_heads: tuple[int, ...]  # query heads; KV heads = heads / 8 (at least 1)
    head_dim: int
    gemm_m: tuple[int, ...]
    gemm_nk: tuple[tuple[int, int], ...]
    experts: tuple[int, ...]
    expert_m: tuple[int, ...]
    expert_nk: tuple[tuple[int, int], ...]
    coll_bytes: tuple[int, ...]
    coll_repeats: int
    budget_s: float  # target timed seconds per kernel case
    max_repeats: int
    #: Kernel-under-collective cases: one GEMM (m, n, k) run while each collective of
    #: these sizes is in flight on the whole world.
    overlap_gemm: tuple[int, int, int] = (256, 256, 256)
    overlap_bytes: tuple[int, ...] = (MIB,)


# Expert shapes from Qwen3-30B-A3B (hidden 2048, expert FFN 768; docs/model.md part A):
# gate+up [m, 2048] x [2048, 1536], down [m, 768] x [768, 2048].
QWEN3_EXPERT = ((1536, 2048), (2048, 768))
# One set per (device kind, --sizes); each line groups one benchmark's fields.
# fmt: off
SIZE_SETS: dict[tuple[str, str], Sizes] = {
    ("cpu", "quick"): Sizes(
        attn_tokens=512, attn_lengths=(512, 128, 32), attn_heads=(2, 4), head_dim=64,
        gemm_m=(16, 64, 256), gemm_nk=((64, 64), (256, 256), (512, 128)),
        experts=(4, 8), expert_m=(8, 32, 128), expert_nk=((128, 256),),
        coll_bytes=tuple(4 * KIB * 4**i for i in range(6)), coll_repeats=15, budget_s=0.03,
        max_repeats=30, overlap_gemm=(256, 256, 256), overlap_bytes=(256 * KIB, 4 * MIB)),
    ("cpu", "full"): Sizes(
        attn_tokens=2048, attn_lengths=(2048, 512, 128, 32), attn_heads=(2, 4, 8), head_dim=64,
        gemm_m=(16, 64, 256, 1024), gemm_nk=((64, 64), (256, 256), (1024, 512)),
        experts=(4, 8, 16), expert_m=(8, 32, 128, 512), expert_nk=((128, 256), (512, 256)),
        coll_bytes=tuple(KIB * 2**i for i in range(15)), coll_repeats=10, budget_s=0.1,
        max_repeats=50, overlap_gemm=(512, 512, 512), overlap_bytes=(MIB, 16 * MIB)),
    ("cuda", "quick"): Sizes(
        attn_tokens=16384, attn_lengths=(16384, 4096, 1024, 256, 64), attn_heads=(8, 32, 64),
        head_dim=128, gemm_m=(64, 256, 1024, 4096, 16384),
        gemm_nk=((2048, 2048), (4096, 4096), (8192, 8192)),
        experts=(8, 16, 128), expert_m=(16, 64, 256, 1024), expert_nk=QWEN3_EXPERT,
        coll_bytes=tuple(16 * KIB * 2**i for i in range(15)), coll_repeats=10, budget_s=0.02,
        max_repeats=50, overlap_gemm=(8192, 8192, 8192), overlap_bytes=(16 * MIB, 256 * MIB)),
    ("cuda", "full"): Sizes(
        attn_tokens=32768, attn_lengths=(32768, 8192, 2048, 512, 128, 32),
        attn_heads=(4, 8, 16, 32, 64), head_dim=128,
        gemm_m=(16, 64, 256, 1024, 4096, 16384, 65536),
        gemm_nk=((1024, 1024), (2048, 2048), (4096, 4096), (8192, 8192), (16384, 4096)),
        experts=(4, 8, 16, 32, 128), expert_m=(4, 16, 64, 256, 1024, 4096), expert_nk=QWEN3_EXPERT,
        coll_bytes=tuple(KIB * 2**i for i in range(21)), coll_repeats=20, budget_s=0.05,
        max_repeats=100, overlap_gemm=(8192, 8192, 8192),
        overlap_bytes=(MIB, 16 * MIB, 256 * MIB)),
}
# fmt: on


def collective_groups(world: int) -> tuple[int, ...]:
    """Every group size the node allows: 2, 3, ..., world (ranks 0..g-1 of the world)."""
    return tuple(range(2, world + 1))
