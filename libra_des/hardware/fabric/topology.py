"""Cluster topologies: a validated YAML description grown into a networkx graph with routes.

A topology file describes one *node* (level 0: GPUs on an NVSwitch and/or a PCIe switch tree
under a host bridge, NICs on the PCIe switches) and the switch levels above it (level 1: the
leaves the NICs plug into; level 2 and up: spine, core), see
:mod:`libra_des.hardware.fabric.levels`.
``nodes`` copies of the node are wired into those levels, so ``nodes: 512`` needs no
hand-written lists. The two-level form of older files (``nvlink``/``pcie``/``nic``/``network``
sections) is still read and converted to levels (:mod:`libra_des.hardware.fabric.two_level`).

Model assumptions (each is a simplification named on purpose):
- One logical NVSwitch per node: each GPU reaches it over one NVLink edge whose bandwidth is
  the GPU's full NVLink bandwidth per direction (the several physical NVSwitch chips of an HGX
  board, or the NVLink switch trays of an NVL72 rack, act as one non-blocking crossbar).
- Edges are full duplex: ``bandwidth`` is bytes/s in *each* direction, so a directed link id
  ``(u, v)`` has its own capacity.
- GPU ``i`` of a node uses NIC ``i * nics // gpus_per_node`` (NCCL's affinity: the NIC on the
  GPU's own PCIe switch); its *rail* is that NIC's index. GPUs and NICs never forward, except
  for PXN below.
- PXN (NCCL's ``NCCL_P2P_PXN_LEVEL`` 2, the default; NVIDIA technical blog, "Doubling all2all
  performance with NCCL 2.12"), only for point-to-point messages (send/recv, all-to-all(v):
  :meth:`Topology.p2p_route`) on a copy that relays (:meth:`Topology.relaying`): on
  rail-optimised leaves with NVLink in the node, a message to another node's GPU on another
  rail first crosses NVLink to its *proxy*, the GPU of the sender's node on the destination's
  rail, and leaves on the proxy's NIC: GPU -> NVSwitch -> proxy -> PCIe -> proxy's NIC ->
  leaf of the destination's rail -> ... -> destination's NIC -> destination. The proxy is the
  rail's GPU at the sender's index within its own rail (wrapping; with one GPU per NIC, the
  GPU with the destination's local index), so the GPUs sharing a rail share its forwarding
  evenly, as fast mode's PXN hop assumes (:meth:`InterNodeA2A.pxn_hop
  <libra_des.hardware.collectives.alltoall.InterNodeA2A.pxn_hop>`). The proxy's staging copy and
  proxy
  thread cost nothing beyond the links' latencies (our simplification). The transfers of
  ring and direct collectives keep :meth:`Topology.route` (rings are rail-aligned but for
  the closing hop of an odd number of nodes, :func:`~libra_des.hardware.
  collective_catalogue.rail_rings`).
- Rail-optimised leaves (``rail_leaf``): NIC ``k`` of every node connects to the leaf of rail
  ``k`` in its leaf group (``fan_out`` nodes per group); a ``leaf`` level puts all NICs of a
  node on one leaf. Every switch connects to every switch of the level above in its unit.
  Unless given, an upward link carries the lower switch's downlink capacity divided by
  ``oversubscription * count`` (count: switches above), so a 2:1 leaf has half the uplink
  of a 1:1 one.
- Routes: inside a node, the weighted shortest path where a link costs
  ``latency + 1 MiB / bandwidth`` (prefers NVLink over PCIe); between nodes, GPU -> its NIC ->
  leaf, then up through every level until the lowest one whose unit holds both ends, and down
  again -> leaf -> NIC -> GPU; the switch taken at each level is a seeded hash of
  (src, dst) (ECMP), the same index going up and coming down, or, with per-packet spraying,
  every switch of the level at once (:mod:`libra_des.hardware.fabric.routing`). A PXN route hashes
  the same (src, dst) pair: every sender's flow is hashed on its own, as fast mode's ECMP
  factor counts them (NCCL's ``NCCL_NET_SHARED_COMMS`` would let the proxy's flows to one
  peer share a connection and a hash: not modelled).
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise
from pathlib import Path
from typing import Any

import networkx as nx

from libra_des.errors import InputError
from libra_des.hardware.fabric.levels import (
    LEVEL_TYPES,
    LeafLevel,
    Tier,
    grow_tiers,
    leaf_name,
    missing_level,
    network_spans,
)
from libra_des.hardware.fabric.links import (
    Bandwidth,
    Latency,
    LinkSpec,
    LinkType,
    PcieSpec,
    link_attrs,
    parse_bandwidth,
    parse_latency,
)
from libra_des.hardware.fabric.rates import Fabric
from libra_des.hardware.fabric.routing import DEFAULT_ROUTING, Routing, bundle_name, is_bundle
from libra_des.hardware.fabric.topology_spec import (
    TopologySpec,
    merge_params,
    parse_spec,
    read_spec,
    shipped_topologies,
)

__all__ = [
    "Bandwidth",
    "Latency",
    "LinkSpec",
    "LinkType",
    "PcieSpec",
    "Topology",
    "TopologySpec",
    "load_topology",
    "parse_bandwidth",
    "parse_latency",
    "shipped_topologies",
]

#: A directed link: (from graph node, to graph node).
LinkId = tuple[str, str]

#: Message size used to weigh links when choosing intra-node routes (bandwidth matters more
#: than latency for anything a collective moves).
ROUTE_REF_BYTES = 1 << 20


@dataclass(frozen=True)
class Link:
    """One direction of an edge."""

    bandwidth: float
    latency: float
    kind: str


class NodeTemplate:
    """One node's internal wiring with local names (``gpu3``, ``nvsw``, ``pcie1``, ...):
    the builder of level 0 (``nvswitch`` or ``pcie``, see
    :mod:`libra_des.hardware.fabric.levels`)."""

    def __init__(self, spec: TopologySpec) -> None:
        self.spec = spec
        self.domain = spec.domain
        self.gpus = spec.gpus_per_node
        self.nics = self.domain.nics
        self.graph = nx.Graph()
        self.graph.add_edges_from(self.edges())
        for name in self.graph.nodes:
            self.graph.nodes[name]["kind"] = local_kind(name)
        self._paths: dict[tuple[str, str], tuple[str, ...]] = {}

    def edges(self) -> Iterator[tuple[str, str, dict[str, Any]]]:
        pcie, gpu_link = self.domain.host_tree(), self.domain.gpu_link()
        for i in range(self.gpus):
            if gpu_link is not None:
                yield f"gpu{i}", "nvsw", link_attrs(gpu_link)
            yield f"gpu{i}", f"pcie{i * pcie.switches // self.gpus}", link_attrs(pcie.link)
        for s in range(pcie.switches):
            yield f"pcie{s}", "host", link_attrs(pcie.up)
        for k in range(self.nics):
            up = "host" if self.domain.nic_attach == "host" else None
            parent = up or f"pcie{k * pcie.switches // self.nics}"
            yield f"nic{k}", parent, link_attrs(pcie.up if up else pcie.link)

    def nic_of(self, local_gpu: int) -> int:
        return local_gpu * self.nics // self.gpus

    @cached_property
    def rails(self) -> tuple[tuple[int, ...], ...]:
        """Per NIC, the local GPUs that send on it (its rail's GPUs of this node)."""
        return tuple(tuple(g for g in range(self.gpus) if self.nic_of(g) == k)
                     for k in range(self.nics))

    def proxy_of(self, local_gpu: int, nic: int) -> int:
        """The local GPU relaying ``local_gpu``'s PXN messages to rail ``nic``: the rail's
        GPU at ``local_gpu``'s index within its own rail, wrapping (module docstring)."""
        own, there = self.rails[self.nic_of(local_gpu)], self.rails[nic]
        return there[own.index(local_gpu) % len(there)]

    @cached_property
    def proxies(self) -> tuple[tuple[int, ...], ...]:
        """:meth:`proxy_of` by local GPU pair (sender, receiver): -1 where they share a rail
        (looked up per message route, so worked out once)."""
        return tuple(tuple(-1 if self.nic_of(i) == self.nic_of(j) else
                           self.proxy_of(i, self.nic_of(j)) for j in range(self.gpus))
                     for i in range(self.gpus))

    def path(self, src: str, dst: str) -> tuple[str, ...]:
        """Cheapest local path that forwards only through switches and the host bridge."""
        key = (src, dst)
        if key not in self._paths:
            kinds = self.graph.nodes
            allowed = [n for n in self.graph if n in key or kinds[n]["kind"] not in ("gpu", "nic")]
            sub = self.graph.subgraph(allowed)
            try:
                self._paths[key] = tuple(nx.dijkstra_path(sub, src, dst, weight=route_weight))
            except nx.NetworkXNoPath:
                raise InputError(
                    "topology", self.spec.name, f"a connected node ({src} cannot reach {dst})"
                ) from None
        return self._paths[key]


def local_kind(name: str) -> str:
    for prefix, kind in (("gpu", "gpu"), ("nvsw", "nvswitch"), ("pcie", "pcie_switch")):
        if name.startswith(prefix):
            return kind
    return "host" if name == "host" else "nic"


def route_weight(_u: str, _v: str, data: Mapping[str, Any]) -> float:
    return float(data["latency"]) + ROUTE_REF_BYTES / float(data["bandwidth"])


class Topology:
    """A grown topology: the networkx graph plus routing between global GPU ids.

    GPU ``g`` lives on node ``g // gpus_per_node`` with local index ``g % gpus_per_node``.
    Graph nodes are named ``n{node}/{local}`` inside nodes, ``leaf{group}.{rail}`` for level
    1 and ``{type}{k}`` (one unit) or ``{type}{unit}.{k}`` above (``spine3``, ``core0``,
    ``spine1.3``); every graph node has a ``kind`` attribute and every edge has
    ``bandwidth`` (bytes/s per direction), ``latency`` (s) and ``kind`` (link type).
    """

    def __init__(self, spec: TopologySpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.nodes = spec.nodes
        self.gpus_per_node = spec.gpus_per_node
        self.num_gpus = spec.nodes * spec.gpus_per_node
        self.template = NodeTemplate(spec)
        self.tiers: tuple[Tier, ...] = grow_tiers(spec.network, spec.nodes, self.template.nics)
        self._routes: dict[tuple[int, int], tuple[LinkId, ...]] = {}
        self._links: dict[LinkId, Link] = {}  # link() answers: every route asks per hop
        self._hops: dict[tuple[int, str, str], tuple[str, ...]] = {}  # node_hops answers
        self.routing: Routing = DEFAULT_ROUTING
        #: Whether point-to-point messages relay through PXN proxies (:meth:`relaying`).
        self.pxn = False
        self.check_connected()

    def routed(self, routing: Routing) -> Topology:
        """The same fabric routing with ``routing`` (a light copy: its own route cache; the
        spec, tiers, link answers and graph are shared)."""
        if routing == self.routing:
            return self
        other = copy.copy(self)
        other.routing = routing
        other._routes = {}
        return other

    def relaying(self, pxn: bool) -> Topology:
        """The same fabric with point-to-point messages relayed through PXN proxies (or not),
        where the fabric allows it (:attr:`pxn_capable`); a light copy as :meth:`routed`'s
        (the direct routes, which PXN leaves alone, are shared)."""
        pxn = pxn and self.pxn_capable
        if pxn == self.pxn:
            return self
        other = copy.copy(self)
        other.pxn = pxn
        return other

    @cached_property
    def pxn_capable(self) -> bool:
        """Whether PXN can relay here: rail-optimised leaves, more than one rail, and NVLink
        between a node's GPUs (fast mode's condition, :meth:`~libra_des.hardware.
        communication.Communication.pxn_in_force`)."""
        rail = bool(self.tiers) and self.tiers[0].spec.type == "rail_leaf"
        return rail and self.template.nics > 1 and self.spec.domain.gpu_link() is not None

    # ------------------------------------------------------------------ construction
    @cached_property
    def graph(self) -> nx.Graph:
        """The whole fabric as a graph, grown on first use: routes and link lookups do not
        need it (at 131,072 GPUs it takes seconds and hundreds of MB)."""
        return self.build_graph()

    def build_graph(self) -> nx.Graph:
        graph = nx.Graph()
        tmpl = self.template
        kinds = dict(tmpl.graph.nodes(data="kind"))
        for a in range(self.nodes):
            graph.add_nodes_from((f"n{a}/{n}", {"kind": k, "node": a}) for n, k in kinds.items())
        graph.add_edges_from(
            (f"n{a}/{u}", f"n{a}/{v}", d)
            for a in range(self.nodes)
            for u, v, d in tmpl.graph.edges(data=True)
        )
        for i, tier in enumerate(self.tiers):
            graph.add_nodes_from((name, {"kind": tier.kind}) for name in tier.switches())
            builder = LEVEL_TYPES[tier.spec.type].builder
            assert builder is not None  # every switch level type registers one
            args = (self.nodes, tmpl.nics) if i == 0 else (self.tiers[i - 1],)
            graph.add_edges_from(builder(tier, *args))
        return graph

    def check_connected(self) -> None:
        """Connectivity, checked on a copy just large enough to hold two units of the
        second-highest level (at most that many nodes plus one).

        Every node is the same template wired the same way, so a fabric of two such units
        (where it has two or more) is connected exactly when the full one is: it has the
        same rails and switches per unit, and each node joins its switches as in the full
        graph.
        """
        spans = [t.span for t in self.tiers if t.spec.fan_out] or [self.nodes]
        small = min(self.nodes, max(spans) + 1)
        if small == self.nodes:
            connected = nx.is_connected(self.graph)
        else:
            try:  # the copy checks itself (and its line would name its own node count)
                Topology(self.spec.model_copy(update={"nodes": small}))
                connected = True
            except InputError:
                connected = False
        if not connected:
            raise InputError("topology", self.name, missing_level(self.tiers, self.nodes))

    # ------------------------------------------------------------------ queries
    def check_gpu(self, gpu: int) -> int:
        if not 0 <= int(gpu) < self.num_gpus:
            raise InputError("gpu", gpu, f"an id in 0..{self.num_gpus - 1}")
        return int(gpu)

    def node_of(self, gpu: int) -> int:
        return self.check_gpu(gpu) // self.gpus_per_node

    def gpu_name(self, gpu: int) -> str:
        node, local = divmod(self.check_gpu(gpu), self.gpus_per_node)
        return f"n{node}/gpu{local}"

    def route(self, src: int, dst: int) -> tuple[LinkId, ...]:
        """Directed links from GPU ``src`` to GPU ``dst`` (empty when they are the same)."""
        key = (self.check_gpu(src), self.check_gpu(dst))
        if key not in self._routes:
            hops = self.route_nodes(*key)
            self._routes[key] = tuple(pairwise(hops))
        return self._routes[key]

    def p2p_route(self, src: int, dst: int) -> tuple[LinkId, ...]:
        """Directed links of a point-to-point message (send/recv, all-to-all(v)) from GPU
        ``src`` to GPU ``dst``: through its PXN proxy where :meth:`proxy` names one, else
        :meth:`route` (module docstring). Relayed routes are not cached here: the flow
        network keeps each path it numbers."""
        via = self.proxy(src, dst)
        return self.route(src, dst) if via is None else self.relayed_route(src, dst, via)

    def relayed_route(self, src: int, dst: int, via: int) -> tuple[LinkId, ...]:
        """Directed links from GPU ``src`` to GPU ``dst`` relayed through the PXN proxy
        ``via`` (:meth:`proxy`)."""
        return tuple(pairwise(self.route_nodes(src, dst, via)))

    def proxy(self, src: int, dst: int) -> int | None:
        """The GPU relaying ``src -> dst`` through PXN, or None where the message goes
        direct: PXN off here, the same node, or ``src`` already on ``dst``'s rail."""
        if not self.pxn:
            return None
        gpn = self.gpus_per_node
        (a, i), (b, j) = divmod(self.check_gpu(src), gpn), divmod(self.check_gpu(dst), gpn)
        local = self.template.proxies[i][j]
        return None if a == b or local < 0 else a * gpn + local

    def route_nodes(self, src: int, dst: int, via: int | None = None) -> list[str]:
        """Graph nodes from GPU ``src`` to GPU ``dst``; ``via``: the PXN proxy to relay
        through (a GPU of ``src``'s node on ``dst``'s rail)."""
        (a, i), (b, j) = divmod(src, self.gpus_per_node), divmod(dst, self.gpus_per_node)
        tmpl = self.template
        if a == b:
            return list(self.node_hops(a, f"gpu{i}", f"gpu{j}")) if i != j else []
        if tmpl.nics == 0 or not self.tiers:
            raise InputError("topology", self.name, f"NICs for inter-node routes ({src}->{dst})")
        k, m = tmpl.nic_of(i), tmpl.nic_of(j)
        if via is None:
            local = self.node_hops(a, f"gpu{i}", f"nic{k}")
        else:  # over NVLink to the proxy, out on its NIC: dst's rail
            p, k = f"gpu{via % self.gpus_per_node}", m
            local = self.node_hops(a, f"gpu{i}", p) + self.node_hops(a, p, f"nic{m}")[1:]
        return [*local, *self.switch_path(src, dst, (a, k), (b, m)),
                *self.node_hops(b, f"nic{m}", f"gpu{j}")]

    def node_hops(self, node: int, src: str, dst: str) -> tuple[str, ...]:
        """Graph nodes of the template's path ``src -> dst`` inside node ``node`` (cached:
        every route through a node repeats one of few local paths, and names built once
        hash once in the link look-ups)."""
        key = (node, src, dst)
        hops = self._hops.get(key)
        if hops is None:
            hops = self._hops[key] = tuple(f"n{node}/{n}" for n in self.template.path(src, dst))
        return hops

    def switch_path(
        self, src: int, dst: int, a: tuple[int, int], b: tuple[int, int]
    ) -> list[str]:
        """Leaf of ``a`` (node, NIC), up through the levels to the lowest one whose unit holds
        both ends, down to the leaf of ``b`` (module docstring; ECMP by hashing src, dst;
        spraying: the level's bundle of switches, :mod:`libra_des.hardware.fabric.routing`)."""
        leaf = self.tiers[0]
        leaf_a, leaf_b = leaf_name(leaf, *a), leaf_name(leaf, *b)
        if leaf_a == leaf_b:
            return [leaf_a]
        up, down = [leaf_a], [leaf_b]
        spray = self.routing.mode == "spray"
        for tier, unit_a, unit_b, k in self.climb(src, dst, a[0], b[0]):
            up.append(tier.name(unit_a, k))
            down.append(tier.name(unit_b, k))
            if spray:
                up[-1], down[-1] = bundle_name(up[-1]), bundle_name(down[-1])
        return up + down[-2::-1]

    def climb(self, src: int, dst: int, a: int, b: int) -> list[tuple[Tier, int, int, int]]:
        """The levels above the leaves a route from node ``a`` to node ``b`` climbs, up to the
        lowest whose unit holds both: each with the two nodes' units there and the switch
        index the routing takes (the same up and down; 0 when spraying)."""
        hashed = self.routing.flow(src, dst)  # once per route, reduced at each level
        levels = []
        for tier in self.tiers[1:]:
            if tier.width == 0:
                break
            unit_a, unit_b = tier.unit_of(a), tier.unit_of(b)
            k = hashed % tier.width
            levels.append((tier, unit_a, unit_b, k))
            if unit_a == unit_b:
                return levels
        raise InputError("topology", self.name, f"a level joining nodes {a} and {b}")

    def link(self, link_id: LinkId) -> Link:
        """A link's numbers from the spec (the same as the graph's edge data, without it)."""
        if link_id not in self._links:
            data = self.link_attrs(*link_id)
            self._links[link_id] = Link(
                float(data["bandwidth"]), float(data["latency"]), str(data["kind"])
            )
        return self._links[link_id]

    def link_attrs(self, u: str, v: str) -> Mapping[str, Any]:
        """Edge data of (u, v): node-internal edges from the template, edges between levels
        from the upper level's link (see :meth:`build_graph`)."""
        (a, _, x), (b, _, y) = u.partition("/"), v.partition("/")
        if x and y:
            if a != b:
                raise KeyError((u, v))
            return dict(self.template.graph.edges[x, y])
        data = link_attrs(self.tiers[max(self.tier_of(u), self.tier_of(v))].link)
        if is_bundle(u) or is_bundle(v):
            # Spraying spreads a bundle's traffic evenly: one link of members x the capacity.
            data["bandwidth"] = float(data["bandwidth"]) * len(self.bundle_members((u, v)))
        return data

    def bundle_members(self, link_id: LinkId) -> list[LinkId]:
        """The physical links a (bundle) link stands for: every switch of one side to every
        switch of the other (each switch links to every switch above it in its unit)."""
        u, v = link_id
        return [(x, y) for x in self.switches_of(u) for y in self.switches_of(v)]

    def switches_of(self, name: str) -> list[str]:
        """A bundle's switches (``spine1.*``: every spine of unit 1), or the switch itself."""
        if not is_bundle(name):
            return [name]
        tier = self.tiers[self.tier_of(name)]
        head, dot, _ = name.rpartition(".")
        unit = int(head.removeprefix(tier.kind)) if dot else 0
        return [tier.name(unit, k) for k in range(tier.width)]

    def tier_of(self, name: str) -> int:
        """Index into :attr:`tiers` of a switch's level (-1 inside a node)."""
        if "/" in name:
            return -1
        kind = re.sub(r"[0-9.*]+$", "", name)
        for i, tier in enumerate(self.tiers):
            if tier.kind == kind:
                return i
        raise KeyError(name)

    @cached_property
    def links(self) -> dict[LinkId, Link]:
        """Every directed link (both directions of each edge) -> bandwidth, latency, kind."""
        out: dict[LinkId, Link] = {}
        for u, v, d in self.graph.edges(data=True):
            link = Link(float(d["bandwidth"]), float(d["latency"]), str(d["kind"]))
            out[(u, v)] = out[(v, u)] = link
        return out

    def latency(self, path: tuple[LinkId, ...]) -> float:
        return sum(self.link(lid).latency for lid in path)

    def bottleneck(self, path: tuple[LinkId, ...]) -> float:
        """The smallest bandwidth on a path (inf for an empty path)."""
        return min((self.link(lid).bandwidth for lid in path), default=float("inf"))

    def layout(self) -> dict[str, object]:
        """The fabric as laid out for this cluster (``result.json``'s ``fabric_layout``):
        nodes, and per switch level its units, switches, nodes per unit, links down and up
        per switch (up: one to every switch of the level above in its unit), its nominal
        oversubscription and the one in force (:meth:`oversubscription_in_force`);
        ``leaves``, ``spines``, ``uplinks_per_leaf`` for the two lowest switch levels;
        ``oversubscription``: the product in force across the top (``nominal_...``: as the
        file gives it)."""
        levels = []
        for i, t in enumerate(self.tiers):
            above = self.tiers[i + 1] if i + 1 < len(self.tiers) else None
            levels.append({
                "level": t.index, "type": t.spec.type, "units": t.units,
                "switches": t.units * t.width, "nodes_per_unit": min(t.span, self.nodes),
                "down_links_per_switch": t.down_ports,
                "uplinks_per_switch": above.width if above is not None else 0,
                "oversubscription": t.spec.oversubscription,
            })
        in_force = self.oversubscription_in_force()
        for row, ratio in zip(levels, in_force, strict=False):
            row["oversubscription_in_force"] = ratio
        below_top = in_force[: max(len(self.tiers) - 1, 0)]
        leaf = levels[0] if levels else None
        return {"nodes": self.nodes, "gpus_per_node": self.gpus_per_node,
                "nics_per_node": self.template.nics,
                "leaves": leaf["switches"] if leaf else 0,
                "spines": levels[1]["switches"] if len(levels) > 1 else 0,
                "uplinks_per_leaf": leaf["uplinks_per_switch"] if leaf else 0,
                "levels": levels,
                "nominal_oversubscription": float(
                    math.prod(t.spec.oversubscription for t in self.tiers[:-1])
                    if self.tiers else 1),
                "oversubscription": float(math.prod(below_top) if below_top else 1)}

    def fabric(self) -> Fabric:
        """The numbers the analytical cost models need (see :class:`Fabric`).

        ``intra_latency``: GPU 0 -> GPU 1 of a node. ``inter_latency``: GPU 0 of one node to
        GPU 0 of a neighbouring node (same rail and leaf when the fabric allows it);
        ``inter_bw``: one NIC port divided by the oversubscription of every level below the
        top (what crosses the top level gets); ``tiers``: per level below the top, the nodes
        one of its units holds and its oversubscription.
        """
        spec, domain = self.spec, self.spec.domain
        network = spec.network
        intra = domain.gpu_link() or domain.host_tree().link
        intra_lat = self.latency(self.route(0, 1)) if self.gpus_per_node > 1 else intra.latency
        spans = network_spans(network)
        in_force = self.oversubscription_in_force()
        tiers = tuple(zip(spans[:-1], in_force[: max(len(network) - 1, 0)], strict=True))
        ratio = math.prod(o for _, o in tiers) if tiers else 1.0
        leaf = network[0] if network else None
        return Fabric(
            gpus_per_node=self.gpus_per_node,
            nodes=self.nodes,
            intra_kind="nvswitch" if domain.gpu_link() else "pcie",
            intra_bw=intra.bandwidth,
            intra_latency=intra_lat,
            inter_bw=leaf.bandwidth / ratio if isinstance(leaf, LeafLevel) else 0.0,
            inter_latency=self.inter_latency(),
            nics_per_node=self.template.nics,
            pcie_bridge_bw=domain.host_tree().up.bandwidth,
            pcie_switches=domain.host_tree().switches,
            oversubscription=ratio,
            nvls=bool(getattr(domain, "nvls", False)),
            leaf_nodes=spans[0] if spans else 32,
            rail_optimized=leaf is None or leaf.type == "rail_leaf",
            tiers=tiers,
            collnet=any(lv.in_network_reduction for lv in network),
            spines=self.tiers[1].width if len(self.tiers) > 1 else 0,
            leaf_load=(self.oversubscription_in_force(floor=False) or [1.0])[0],
            leaf_attached=min(self.nodes, self.tiers[0].span) if self.tiers else 0,
        )

    def oversubscription_in_force(self, floor: bool = True) -> list[float]:
        """Per switch level, its down:up ratio as this cluster uses it (never below 1): the
        nominal ratio times the share of its provisioned down ports that have something
        attached (a leaf of ``fan_out`` 32 with 8 nodes carries 8 nodes' traffic on uplinks
        sized for 32); levels not grown keep their nominal ratio."""
        out = []
        for i, level in enumerate(self.spec.network):
            if i >= len(self.tiers):
                out.append(level.oversubscription)
                continue
            tier = self.tiers[i]
            below = self.tiers[i - 1] if i else None
            used_units = min(self.nodes, tier.span)
            if below is not None:
                used_units = -(-used_units // below.span)
            per_unit = tier.down_ports / max(tier.span // (below.span if below else 1), 1)
            share = used_units * per_unit / max(tier.down_ports, 1)
            ratio = level.oversubscription * min(share, 1.0)
            out.append(max(ratio, 1.0) if floor else ratio)
        return out

    def inter_latency(self) -> float:
        """Latency between neighbouring nodes; with one node, what a second node would see."""
        if not self.tiers:
            return 0.0
        if self.nodes > 1:
            return self.latency(self.route(0, self.gpus_per_node))
        tmpl = self.template
        local = tmpl.path("gpu0", f"nic{tmpl.nic_of(0)}")
        hops = sum(tmpl.graph.edges[u, v]["latency"] for u, v in pairwise(local))
        return 2.0 * (float(hops) + self.tiers[0].link.latency)


# ----------------------------------------------------------------------------- loading


def load_topology(
    spec: str | Path | Mapping[str, Any], params: Mapping[str, Any] | None = None
) -> Topology:
    """Read (a shipped name, a path or a mapping), apply ``params``, validate and grow it."""
    raw = dict(spec) if isinstance(spec, Mapping) else read_spec(spec)
    data = merge_params(raw, params or {})
    return Topology(parse_spec(data))
