"""Regenerate every paper-style figure: ``python -m paper_figs.all --out figs/ [--quick]``.

Sweeps resume from ``OUT/data/``, so a rerun only draws. An optional figure whose input is
missing or fails (the MoE breakdown) is reported and skipped; any other failure makes the
exit status 1 after the remaining figures have been tried.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from paper_figs import (
    attention_straggler,
    bh_grid,
    dp_scaling,
    moe_breakdown,
    pool_imbalance,
    pool_sweep,
    pp_microbatch,
)
from paper_figs.common import FigOptions, options

FIGURES: tuple[tuple[str, Callable[[FigOptions], Path], bool], ...] = (
    # (name, make, optional)
    (pool_imbalance.NAME, pool_imbalance.make, False),
    (bh_grid.NAME, bh_grid.make, False),
    (dp_scaling.NAME, dp_scaling.make, False),
    (pp_microbatch.NAME, pp_microbatch.make, False),
    (attention_straggler.NAME, attention_straggler.make, False),
    (pool_sweep.NAME, pool_sweep.make, False),
    (moe_breakdown.NAME, moe_breakdown.make, True),
)


def run_one(name: str, make: Callable[[FigOptions], Path], optional: bool,
            opts: FigOptions) -> bool:
    """Draw one figure; False if a required figure failed."""
    print(f"{name}:", file=sys.stderr, flush=True)
    began = time.perf_counter()
    try:
        path = make(opts)
    except Exception as exc:  # one broken figure must not stop the others
        kind = "skipped" if optional else "FAILED"
        print(f"  {kind}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return optional
    print(f"  -> {path} ({time.perf_counter() - began:.1f} s)", file=sys.stderr, flush=True)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    opts = options(argv, __doc__.splitlines()[0])
    began = time.perf_counter()
    ok = [run_one(name, make, optional, opts) for name, make, optional in FIGURES]
    print(f"{sum(ok)}/{len(ok)} figures ok in {time.perf_counter() - began:.1f} s "
          f"-> {opts.out}", file=sys.stderr)
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
