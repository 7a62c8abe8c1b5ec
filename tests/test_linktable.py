"""The incremental link table and path packing against full recomputation."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from libra_des.hardware.variance.model import VarianceModel
from libra_des.sim.network.flow.fluid import FluidState
from libra_des.sim.network.flow.link_table import LinkTable
from tests.reference.linktable import full_binding, full_common


@dataclass
class _Link:
    bandwidth: float
    latency: float = 0.0


class _Topology:
    """Just what :class:`LinkTable` asks of a topology: link ``(k, k)``'s bandwidth."""

    def __init__(self, bandwidths: list[float]) -> None:
        self.bandwidths = bandwidths

    def link(self, link_id: tuple[int, int]) -> _Link:
        return _Link(self.bandwidths[link_id[0]])

    def bundle_members(self, link_id: tuple[int, int]) -> list[tuple[int, int]]:
        return [link_id]


def _routes(rng: np.random.Generator, links: int, pool: list[list[int]]) -> list[list[list[int]]]:
    """A batch of routes as segments: repeats of one pair both ways (mutual pairs, equal
    route sets), and chains of segments drawn from ``pool`` (so segments recur, as the flow
    network's do) or new random ones added to it; no route crosses a link twice."""
    batch = []
    for _ in range(int(rng.integers(1, 6))):
        if rng.random() < 0.3:
            a, b = (int(x) for x in rng.choice(links, 2, replace=False))
            batch.append([[a, b] if rng.random() < 0.5 else [b, a]])
            continue
        route: list[list[int]] = []
        for _ in range(int(rng.integers(1, 4))):
            if pool and rng.random() < 0.7:
                segment = pool[int(rng.integers(len(pool)))]
            else:
                size = int(rng.integers(1, 4))
                segment = [int(x) for x in rng.choice(links, size, replace=False)]
                pool.append(segment)
            if not set(segment) & {link for part in route for link in part}:
                route.append(segment)
        batch.append(route)
    return batch


@pytest.mark.parametrize("seed", range(12))
def test_incremental_binding_equals_full_recomputation(seed: int) -> None:
    rng = np.random.default_rng(seed)
    links = int(rng.integers(4, 40))
    # Few distinct capacities: many ties, where numbering and mutual pairs decide.
    bandwidths = [float(x) for x in rng.choice([1.0, 2.0, 2.0, 3.0], links)]
    table = LinkTable(_Topology(bandwidths), VarianceModel.none())  # type: ignore[arg-type]
    partial, whole = FluidState(np.zeros(1)), FluidState(np.zeros(1))
    routes: list[np.ndarray] = []
    pool: list[list[int]] = []
    for _ in range(30):
        for route in _routes(rng, links, pool):
            segments = [tuple(table.number((k, k)) for k in part) for part in route]
            table.add_route(segments)
            routes.append(np.array([n for part in segments for n in part], dtype=np.int64))
        old = table.binding.copy()
        changed = table.refresh()
        # Settled segments skipped (LinkTable.add_route) leave every common set as it is.
        assert table._common == full_common(routes, len(table._common))
        want = full_binding(table._common, table.capacity)
        assert table.binding.tolist() == want.tolist()
        assert table.flipped.tolist() == np.flatnonzero(want[: old.size] != old).tolist()
        assert changed == (want.size != old.size or bool((want[: old.size] != old).any()))
        partial.set_links(table.capacity)
        whole.set_links(table.capacity)
        partial.set_paths(routes, table.binding, changed, table.flipped)
        # Every link flipped: every path re-packed, the reference for the partial re-pack.
        whole.set_paths(routes, table.binding, changed, np.arange(table.binding.size))
        assert partial.plinks.tolist() == whole.plinks.tolist()
        assert partial.pn.tolist() == whole.pn.tolist()
    assert table._settled  # the skip was taken
