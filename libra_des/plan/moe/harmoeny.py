"""HarMoEny: greedy token moves on the exact routing, on the critical path (docs/model.md B).

After the gate, every pair sits on its expert's home GPU; the planner moves pairs from the
most- to the least-loaded GPU (any pair, any GPU) with the same greedy engine as Libra's
sharding. A GPU that receives pairs of an expert it lacks must fetch that expert's weights
before computing them (``fetched``).

Published system (HarMoEny, arXiv 2506.12417): redistributes tokens from overloaded to
underused GPUs and prefetches the needed experts asynchronously from host (system) memory to
the GPUs, so fetching overlaps computation. Modelled (``sim/moe/costs.py``,
``sim/moe/batch.py``): a CPU plan after the gate (routing to the host, greedy moves, metadata
back), then each GPU pulls the experts it lacks over its own PCIe link while its resident
experts compute; the fetched experts' GEMMs wait for the fetch. Simplified: our greedy engine
stands in for HarMoEny's scheduler, and experts are fetched per layer after the plan, not
prefetched across layers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from libra_des.plan.moe.sharding import greedy_moves


@dataclass(frozen=True)
class HarmoenyResult:
    load: np.ndarray
    fetched: np.ndarray  # [G, E] experts whose weights a GPU must fetch
    iterations: int


def harmoeny_moves(
    counts: np.ndarray, home: np.ndarray, tolerance: float = 0.01
) -> HarmoenyResult:
    """Rebalance ``counts[origin, expert]`` by moving any pairs to any GPU."""
    start = home * counts.sum(axis=0)[None, :]
    anywhere = np.ones_like(home)
    result = greedy_moves(start, start, anywhere, tolerance)
    fetched = (result.load > 0) & ~home
    return HarmoenyResult(result.load, fetched, result.iterations)
