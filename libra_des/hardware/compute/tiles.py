"""A FlashAttention call's tiles: how many row blocks (CTAs) and padded tile cells a causal
call of q queries over k keys runs, per head. Geometry only (no price): the attention cost
(:mod:`libra_des.hardware.compute.kernels`) prices it, and planners that choose chunk shapes
(WLB-LLM's sharding choice) compare it.
"""

from __future__ import annotations

import numpy as np

#: FlashAttention-2 forward tile for head_dim 128 (query rows x keys). Assumption taken from
#: the public kernel's launch template, not a datasheet number.
BLOCK_M = 128.0
BLOCK_N = 64.0


def tile_geometry(
    q: np.ndarray, k: np.ndarray, block_m: float, block_n: float
) -> tuple[np.ndarray, np.ndarray]:
    """``(CTAs, padded tile cells)`` per head of a causal call with ``q`` queries, ``k`` keys.

    Row block i covers queries [i*bm, (i+1)*bm) and sees ``k - q + (i+1)*bm`` keys (the last
    block sees all ``k``); partial blocks are rounded up by half a block on average.
    """
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    rows = np.maximum(1.0, q / block_m + 0.5)
    offset = np.maximum(k - q, 0.0)
    offset = np.where(offset > 0, offset + block_n / 2, 0.0)
    last = np.where(k > 0, k + block_n / 2, 0.0)
    cells = block_m * ((rows - 1) * offset + block_m * (rows - 1) * rows / 2 + last)
    return rows, cells
