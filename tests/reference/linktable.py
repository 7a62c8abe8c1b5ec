"""The link table's implication set recomputed from scratch: the reference the incremental
:meth:`libra_des.sim.network.flow.link_table.LinkTable.refresh` is tested against
(tests/test_linktable.py).

Link ``a`` is implied (not binding) when some ``b`` on every route through it is narrower,
or as wide and either not mutual (``a`` is not on every route through ``b``) or
lower-numbered (the rule of :class:`~libra_des.sim.network.flow.link_table.LinkTable`).
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


def full_common(routes: list[np.ndarray], links: int) -> list[set[int] | None]:
    """Each link's common set from scratch: the other links on every route through it (None:
    no route yet)."""
    common: list[set[int] | None] = [None] * links
    for route in routes:
        on_route = {int(link) for link in route}
        for link in on_route:
            found = common[link]
            common[link] = on_route - {link} if found is None else found & on_route
    return common
