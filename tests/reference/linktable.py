"""The link table's implication set recomputed from scratch: the reference the incremental
:meth:`libra_des.sim.network.flow_model.LinkTable.refresh` is tested against
(tests/test_linktable.py).

Link ``a`` is implied (not binding) when some ``b`` on every route through it is narrower,
or as wide and either not mutual (``a`` is not on every route through ``b``) or
lower-numbered (the rule of :class:`~libra_des.sim.network.flow_model.LinkTable`).
"""

from __future__ import annotations

import numpy as np


def full_binding(common: list[set[int] | None], capacity: np.ndarray) -> np.ndarray:
    """Every link's binding flag from its common set (None: no route yet) and capacities."""
    pairs = [(a, b) for a, links in enumerate(common) for b in links or ()]
    binding = np.ones(len(common), dtype=bool)
    if pairs:
        lo, hi = np.array(pairs).T
        mutual = np.array([a in (common[b] or ()) for a, b in pairs])
        cap = capacity
        tie = cap[hi] == cap[lo]
        implied = (cap[hi] < cap[lo]) | (tie & (~mutual | (hi < lo)))
        binding[lo[implied]] = False
    return binding
