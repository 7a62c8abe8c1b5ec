"""The directed links of the flow network, numbered in order of first use, and which of them
can ever bind a flow (:class:`LinkTable`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from libra_des.hardware.fabric.topology import LinkId, Topology
from libra_des.hardware.variance.model import VarianceModel
from libra_des.sim.network.flow.routes import Segment


class LinkTable:
    """The directed links the network has routed over, numbered in order of first use.

    Besides each link's capacity it tracks which links can ever limit a flow. Link ``l`` is
    *implied* by link ``m`` when every route seen so far through ``l`` also crosses ``m``
    and ``m`` is no wider: ``m``'s load is then at least ``l``'s, so ``l`` never binds and
    dropping its constraint leaves the max-min allocation as it was (for equal capacities
    and equal route sets the higher-numbered link is dropped). A GPU's PCIe hops in front of
    its NIC are implied by the NIC port, for example. A new route can undo an implication,
    so the set is refreshed whenever routes were added.

    Refreshing is incremental: a link's status depends on its own common set, the
    capacities (fixed once numbered) and, for each ``m`` in that set, whether ``l`` is in
    ``m``'s (a mutual pair). Common sets only shrink, and only on new routes, so only the
    links on routes added since the last refresh and the links holding one of those in
    their common set (a reverse index, pruned as it is read) can change status. The full
    recomputation is kept as the tests' reference (``tests/reference/linktable.py``).

    Routes come as segments (:mod:`.routes`). A segment recurs in many routes, and once
    each of its links' common sets lies within it, a route through it no longer changes
    them, nor (so) their status: :meth:`add_route` skips it, and its links are not fresh.
    """

    def __init__(self, topology: Topology, variance: VarianceModel) -> None:
        self.topology = topology
        self.variance = variance
        self.index: dict[LinkId, int] = {}
        self._capacity: list[float] = []
        self._common: list[set[int] | None] = []  # other links on every route through l
        # Links whose common set held l when it was first set (a superset of those that
        # still do: sets only shrink).
        self._holders: list[set[int]] = []
        self._fresh: set[int] = set()  # links on routes added since the last refresh
        # Segments whose links' common sets lie within them (see add_route): they only
        # shrink, so a segment once settled stays so.
        self._settled: set[Segment] = set()
        self.binding = np.ones(0, dtype=bool)
        #: Links numbered before the last refresh whose binding it changed.
        self.flipped = np.zeros(0, dtype=np.int64)
        self.capacity = np.zeros(0)
        self.latency: list[float] = []  # one-way seconds per link
        self.stale = False

    def number(self, link_id: LinkId) -> int:
        found = self.index.get(link_id)
        if found is not None:
            return found
        link = self.topology.link(link_id)
        # A sprayed bundle splits evenly, so its slowest member sets its pace.
        members = self.topology.bundle_members(link_id)
        factor = max(self.variance.link_factor(m) for m in members)
        self.index[link_id] = len(self._capacity)
        self._capacity.append(link.bandwidth / factor)
        self.latency.append(link.latency)
        self._common.append(None)
        self._holders.append(set())
        return self.index[link_id]

    def add_route(self, segments: Sequence[Segment]) -> None:
        """A new route, given as its segments' link numbers in route order. A *settled*
        segment is skipped: each of its links' common sets lies within the segment, so a
        route holding the whole segment leaves them as they are, and their links' status
        cannot change through it (class docstring)."""
        settled, commons = self._settled, self._common
        on_route: set[int] | None = None
        for segment in segments:
            if segment in settled:
                continue
            if on_route is None:
                on_route = {link for part in segments for link in part}
            for link in segment:
                common = commons[link]
                if common is None:
                    common = commons[link] = on_route - {link}
                    for other in common:
                        self._holders[other].add(link)
                else:
                    common &= on_route
            self._fresh.update(segment)
            within = set(segment)
            if all(within.issuperset(commons[link] or ()) for link in segment):  # all set now
                settled.add(segment)
        self.stale = True

    def refresh(self) -> bool:
        """Recompute :attr:`binding` (and :attr:`capacity`, :attr:`flipped`) for the links
        whose status new routes can have changed; True if it changed (links added or a
        status flipped)."""
        self.stale = False
        # Numbered links keep their capacity: only the new ones are converted.
        self.capacity = np.concatenate(
            [self.capacity, np.array(self._capacity[self.capacity.size :], dtype=float)])
        old = self.binding
        binding = np.ones(len(self._capacity), dtype=bool)
        binding[: old.size] = old
        candidates = set(self._fresh)
        for link in self._fresh:
            holders = {a for a in self._holders[link] if link in (self._common[a] or ())}
            self._holders[link] = holders
            candidates |= holders
        self._fresh = set()
        for link in candidates:
            binding[link] = self._binds(link)
        self.flipped = np.flatnonzero(binding[: old.size] != old)
        self.binding = binding
        return binding.size != old.size or bool(self.flipped.size)

    def _binds(self, a: int) -> bool:
        """Whether no link on every route through ``a`` implies it (class docstring)."""
        cap, common = self._capacity, self._common
        for b in common[a] or ():
            if cap[b] < cap[a] or (cap[b] == cap[a] and (b < a or a not in (common[b] or ()))):
                return False
        return True
