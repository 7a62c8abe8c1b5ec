"""Link numbers of the flow network's routes, put together from shared segments.

A route between nodes is four segments (:meth:`~libra_des.hardware.fabric.topology.Topology.
route_nodes`): inside the source node from the GPU (or its PXN proxy) to the NIC and on to
its leaf; up the switch levels from that leaf to the lowest switch joining both nodes; down
from it to the destination's leaf; and into the destination node. Every segment recurs in
many routes: a node's few local paths in every route leaving or entering it, a leaf's climb
to the switches the hash picks in every route from its unit that takes them. So each
segment's link numbers are worked out once, from the topology's names, and routes are the
concatenation of their segments' numbers.

Numbering order is kept: a segment seen first numbers its links in route order, and a
segment seen before holds only numbered links, so every link gets the number a link-by-link
walk of the same routes in the same order gives it (that order breaks ties in
:class:`~libra_des.sim.network.flow.link_table.LinkTable`; the tests compare the two).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise

from libra_des.hardware.fabric.levels import leaf_name
from libra_des.hardware.fabric.topology import LinkId, Topology

#: A switch path half's key: a leaf's (unit, rail), then per level climbed the unit and the
#: switch index taken (see :meth:`RouteNumbers._switch_keys`).
SwitchKey = tuple[int, ...]
#: A segment's link numbers, in route order.
Segment = tuple[int, ...]


class RouteNumbers:
    """Link numbers of a topology's routes (``number``: a link's number, numbering it on
    first sight), with each segment's numbers memoised."""

    def __init__(self, topology: Topology, number: Callable[[LinkId], int]) -> None:
        self.topology = topology
        self.number = number
        self._up: dict[tuple[int, int, int, int], Segment] = {}
        self._switches: dict[SwitchKey, Segment] = {}
        self._down: dict[tuple[int, int, int], Segment] = {}
        tmpl = topology.template
        # Each local GPU's NIC; none where routes never leave a node.
        fabric = tmpl.nics > 0 and bool(topology.tiers)
        self._nics = [tmpl.nic_of(g) for g in range(topology.gpus_per_node)] if fabric else []
        leaf = topology.tiers[0] if fabric else None
        # The leaf level's span in nodes, and whether its switches are per rail.
        self._leaf = (leaf.span, leaf.spec.type == "rail_leaf") if leaf else (1, False)

    def of(self, src: int, dst: int, via: int | None) -> list[int]:
        """Link numbers from GPU ``src`` to GPU ``dst`` (through the PXN proxy ``via``, a
        GPU of ``src``'s node, if given), in route order."""
        return [link for segment in self.segments(src, dst, via) for link in segment]

    def segments(self, src: int, dst: int, via: int | None) -> tuple[Segment, ...]:
        """:meth:`of` as its segments (one, inside a node or without a fabric). Two nodes
        under one leaf switch have an empty climb and descent."""
        topo = self.topology
        gpn = topo.gpus_per_node
        (a, i), (b, j) = divmod(src, gpn), divmod(dst, gpn)
        if a == b or not self._nics:
            return (self._numbered(list(pairwise(topo.route_nodes(src, dst, via)))),)
        nics = self._nics
        m = nics[j]
        k, proxy = (nics[i], -1) if via is None else (m, via % gpn)
        up = self._up.get((a, i, k, proxy))
        if up is None:
            up = self._up[a, i, k, proxy] = self._up_links(a, i, k, proxy)
        span, rail = self._leaf
        if a // span == b // span and (not rail or k == m):
            climb: Segment = ()
            descent: Segment = ()
        else:
            climb, descent = self._switch_halves(src, dst, a, k, b, m)
        # Numbered after the switch path: a link-by-link walk meets them last.
        down = self._down.get((b, m, j))
        if down is None:
            leaf = leaf_name(topo.tiers[0], b, m)
            hops = (leaf, *topo.node_hops(b, f"nic{m}", f"gpu{j}"))
            down = self._down[b, m, j] = self._numbered(list(pairwise(hops)))
        return up, climb, descent, down

    def _switch_halves(
        self, src: int, dst: int, a: int, k: int, b: int, m: int
    ) -> tuple[Segment, Segment]:
        """The switch path's climb from node ``a``'s leaf (NIC ``k``) and its descent to node
        ``b``'s (NIC ``m``): each half recurs far more often than the two together."""
        rise, fall = self._switch_keys(src, dst, a, k, b, m)
        climb, descent = self._switches.get(rise), self._switches.get(fall)
        if climb is None or descent is None:
            names = self.topology.switch_path(src, dst, (a, k), (b, m))
            top = (len(rise) - 2) // 2  # levels climbed
            climb = self._switches[rise] = self._numbered(list(pairwise(names[: top + 1])))
            descent = self._switches[fall] = self._numbered(list(pairwise(names[top:])))
        return climb, descent

    def _up_links(self, a: int, i: int, k: int, proxy: int) -> Segment:
        """Node ``a``'s links from local GPU ``i`` (through local GPU ``proxy``, unless -1)
        to NIC ``k`` and its leaf (:meth:`Topology.route_nodes`'s first segment)."""
        topo = self.topology
        nic, gpu = f"nic{k}", f"gpu{i}"
        if proxy < 0:
            local = topo.node_hops(a, gpu, nic)
        else:
            p = f"gpu{proxy}"
            local = topo.node_hops(a, gpu, p) + topo.node_hops(a, p, nic)[1:]
        return self._numbered(list(pairwise((*local, leaf_name(topo.tiers[0], a, k)))))

    def _switch_keys(
        self, src: int, dst: int, a: int, k: int, b: int, m: int
    ) -> tuple[SwitchKey, SwitchKey]:
        """What names :meth:`Topology.switch_path`'s climb and descent: each side's leaf
        (unit, rail) and, per level climbed (:meth:`Topology.climb`), its unit there and the
        switch taken. The descent's key is marked apart from a climb's by a leading -1."""
        topo = self.topology
        leaf = topo.tiers[0]
        rail = leaf.spec.type == "rail_leaf"
        rise = [leaf.unit_of(a), k if rail else 0]
        fall = [-1, leaf.unit_of(b), m if rail else 0]
        if rise != fall[1:]:
            for _, unit_a, unit_b, pick in topo.climb(src, dst, a, b):
                rise += (unit_a, pick)
                fall += (unit_b, pick)
        return tuple(rise), tuple(fall)

    def _numbered(self, links: list[LinkId]) -> Segment:
        number = self.number
        return tuple([number(link) for link in links])
