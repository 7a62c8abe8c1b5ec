"""Median wall times of the planners (not a test): ``python benchmarks/planners.py``.

* VRSP on one window of 8,192 packed sequences of the 256K corpus (target <= 20 ms);
* TAP placement of one pool of the 1M corpus: the 8 fullest of 64 packed sequences, cp = 8
  (64 workers), B = 16,384, H = 8 -> about 4,096 tiles (target <= 100 ms);
* a baseline measured in the same run: Python's ``sorted()`` of 8,192 floats, so figures
  from machines of different speed can be compared through the ratio.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np

from libra_des.commands.plan import load_model
from libra_des.config import load_workload
from libra_des.plan.grouping import vrsp
from libra_des.plan.tap import build_tiles, place
from libra_des.workload.packing import make_stream


def median_seconds(fn: Callable[[], object], repeats: int, warmup: int = 2) -> float:
    """Median wall time of ``fn`` over ``repeats`` calls after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def main() -> None:
    rng = np.random.default_rng(0)
    weights = make_stream(load_workload("longctx-256k"), rng).next_window(8192).sum_sq()
    floats = weights.tolist()
    base = median_seconds(lambda: sorted(floats), repeats=200)
    t_vrsp = median_seconds(lambda: vrsp(weights, 8), repeats=50)

    window = make_stream(load_workload("longctx-1m"), rng).next_window(64)
    # The 8 fullest packed sequences: ~64 blocks each, so 8 x 64 x H=8 = 4,096 tiles.
    pool = window.take(np.argsort(-window.tokens(), kind="stable")[:8])
    tiles = build_tiles(pool.seqs(), cp=8, model=load_model("qwen3-30b-a3b"), heads_split=8,
                        block_size=16_384, packed_length=pool.packed_length)
    t_place = median_seconds(lambda: place(tiles, 64, 0.03), repeats=20)

    print(f"baseline sorted() of 8,192 floats: {base * 1e3:8.3f} ms")
    print(f"VRSP, 8,192 sequences, P = 8:      {t_vrsp * 1e3:8.3f} ms "
          f"(target 20 ms; {t_vrsp / base:.1f}x baseline)")
    print(f"TAP place, {len(tiles):,} tiles, 64 workers: {t_place * 1e3:8.3f} ms "
          f"(target 100 ms; {t_place / base:.1f}x baseline)")


if __name__ == "__main__":
    main()
