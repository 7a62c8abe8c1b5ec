"""Median wall times of the planners (not a test): ``python benchmarks/planners.py``.

* VRSP on one window of 8,192 packed sequences of the 256K corpus (target <= 20 ms);
* TAP placement of one pool of the 1M corpus: the 8 fullest of 64 packed sequences, cp = 8
  (64 workers), B = 16,384, H = 8 -> about 4,096 tiles, by the kernel (target <= 3 ms) and by
  the numpy copy of tests/reference/tap.py (checked identical here);
* the kernel's one-off costs, each in a fresh interpreter: first placement with the on-disk
  cache warm (numba import + cache load) and cold (compilation into an empty cache);
* a baseline measured in the same run: Python's ``sorted()`` of 8,192 floats, so figures
  from machines of different speed can be compared through the ratio.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent / "tests"))
from reference.tap import place_reference

from libra_des.config import load_workload
from libra_des.plan.grouping import vrsp
from libra_des.plan.tap import build_tiles, place
from libra_des.runs.plan_replay import load_model
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


FIRST_CALL = """
import time, numpy as np
from libra_des.plan.tap import build_tiles, place
from libra_des.config import ModelSpec
m = ModelSpec(name="m", layers=1, hidden=64, heads_q=8, heads_kv=2, head_dim=4, ffn=64)
tiles = build_tiles([np.array([4096, 4096])], cp=2, model=m, heads_split=8, block_size=512,
                    packed_length=8192)
t0 = time.perf_counter()
place(tiles, 2, 0.03)
print(time.perf_counter() - t0)
"""


def first_call_seconds(cache_dir: str | None) -> float:
    """Wall time of the first compiled placement in a fresh interpreter (numba import included).

    ``cache_dir``: an empty LIBRA_DES_CACHE (cold: compiles) or None (the usual cache).
    """
    env = dict(os.environ)
    if cache_dir is not None:
        env["LIBRA_DES_CACHE"] = cache_dir
    out = subprocess.run([sys.executable, "-c", FIRST_CALL], env=env, check=True,
                         capture_output=True, text=True)
    return float(out.stdout.split()[-1])


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
    fast = place(tiles, 64, 0.03)
    ref = place_reference(tiles, 64, 0.03)
    identical = all(np.array_equal(getattr(fast, k), getattr(ref, k))
                    for k in ("worker", "loads", "delta", "order"))
    t_place = median_seconds(lambda: place(tiles, 64, 0.03), repeats=50)
    t_ref = median_seconds(lambda: place_reference(tiles, 64, 0.03), repeats=10)
    first_call_seconds(None)  # make sure the usual cache is filled
    warm = statistics.median(first_call_seconds(None) for _ in range(3))
    with tempfile.TemporaryDirectory() as empty:
        cold = first_call_seconds(empty)

    print(f"baseline sorted() of 8,192 floats: {base * 1e3:8.3f} ms")
    print(f"VRSP, 8,192 sequences, P = 8:      {t_vrsp * 1e3:8.3f} ms "
          f"(target 20 ms; {t_vrsp / base:.1f}x baseline)")
    print(f"TAP place, {len(tiles):,} tiles, 64 workers: {t_place * 1e3:8.3f} ms "
          f"(target 3 ms; {t_place / base:.1f}x baseline), {t_ref * 1e3:.3f} ms reference "
          f"({t_ref / t_place:.0f}x slower); identical: {identical}")
    print(f"kernel, first call in a fresh process: {warm:.2f} s with the disk cache, "
          f"{cold:.2f} s compiling (fresh clone)")


if __name__ == "__main__":
    main()
