"""Cluster topologies: a validated YAML description grown into a networkx graph with routes.

A topology file describes one *node* (GPUs on an NVSwitch and/or a PCIe switch tree under a
host bridge, NICs on the PCIe switches) and how ``nodes`` copies of it are wired into a
two-tier leaf/spine fabric. The graph is grown from that template, so ``nodes: 512`` needs no
hand-written lists.

Model assumptions (each is a simplification named on purpose):
- One logical NVSwitch per node: each GPU reaches it over one NVLink edge whose bandwidth is
  the GPU's full NVLink bandwidth per direction (the several physical NVSwitch chips of an HGX
  board act as one non-blocking crossbar).
- Edges are full duplex: ``bandwidth`` is bytes/s in *each* direction, so a directed link id
  ``(u, v)`` has its own capacity.
- GPU ``i`` of a node uses NIC ``i * nics // gpus_per_node`` (NCCL's affinity: the NIC on the
  GPU's own PCIe switch). No PXN relaying through another GPU: GPUs and NICs never forward.
- Rail-optimised fabric: NIC ``k`` of every node connects to the leaf of rail ``k`` in its leaf
  group (``nodes_per_leaf`` nodes per group); otherwise all NICs of a node share one leaf.
  Every leaf connects to every spine. Unless given, a leaf-spine link carries
  ``downlink / (oversubscription * spines)`` where ``downlink`` is the leaf's nominal host-side
  bandwidth (``nodes_per_leaf`` ports), so a 2:1 fabric has half the uplink of a 1:1 one.
- Routes: inside a node, the weighted shortest path where a link costs
  ``latency + 1 MiB / bandwidth`` (prefers NVLink over PCIe); between nodes, GPU -> its NIC ->
  leaf [-> spine -> leaf] -> NIC -> GPU, with the spine picked by a deterministic hash of
  (src, dst) (ECMP).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any, Literal

import networkx as nx
from pydantic import BeforeValidator, Field

from libra_des.config import ROOT, Frozen, read_yaml, resolve_path, validate
from libra_des.errors import InputError
from libra_des.hardware.fabric import Fabric

#: A directed link: (from graph node, to graph node).
LinkId = tuple[str, str]
LinkType = Literal["nvlink", "pcie", "ethernet", "roce", "infiniband"]

#: Message size used to weigh links when choosing intra-node routes (bandwidth matters more
#: than latency for anything a collective moves).
ROUTE_REF_BYTES = 1 << 20

SUFFIXES = (".yaml", ".yml")
_BW_UNITS = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_LAT_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_QUANTITY = re.compile(r"^\s*([-+0-9.eE]+)\s*([a-zA-Zµ/]*)\s*$")


def parse_bandwidth(value: Any) -> Any:
    """``400Gb/s`` -> 5e10, ``450 GB/s`` -> 4.5e11 (bytes/s); numbers pass through."""
    if not isinstance(value, str):
        return value
    match = _QUANTITY.match(value)
    unit = match.group(2).removesuffix("/s") if match else "?"
    if not match or unit[-1:] not in ("B", "b") or unit[:-1].lower() not in _BW_UNITS:
        raise ValueError("bytes/s as a number or a string like '400Gb/s' or '450GB/s'")
    per_bit = 1 / 8 if unit.endswith("b") else 1.0
    return float(match.group(1)) * _BW_UNITS[unit[:-1].lower()] * per_bit


def parse_latency(value: Any) -> Any:
    """``1.5us`` -> 1.5e-6 (seconds); numbers pass through."""
    if not isinstance(value, str):
        return value
    match = _QUANTITY.match(value)
    if not match or match.group(2) not in _LAT_UNITS:
        raise ValueError("seconds as a number or a string like '2us', '500ns'")
    return float(match.group(1)) * _LAT_UNITS[match.group(2)]


Bandwidth = Annotated[float, BeforeValidator(parse_bandwidth), Field(gt=0)]
Latency = Annotated[float, BeforeValidator(parse_latency), Field(ge=0)]


class LinkSpec(Frozen):
    """One kind of edge: bytes/s per direction, one-way latency (s), link technology."""

    type: LinkType
    bandwidth: Bandwidth
    latency: Latency = 0.0


class NVLinkSpec(LinkSpec):
    """Each GPU's link to the node's (logical) NVSwitch; ``nvls``: in-switch reductions."""

    type: LinkType = "nvlink"
    nvls: bool = False


class PcieSpec(Frozen):
    """PCIe tree: ``switches`` switches per node, each under the host bridge (CPU root)."""

    switches: int = Field(default=1, gt=0)
    link: LinkSpec
    uplink: LinkSpec | None = None

    @property
    def up(self) -> LinkSpec:
        return self.uplink or self.link


class NicSpec(LinkSpec):
    """``count`` NICs per node; bandwidth/latency/type describe the NIC-to-leaf port."""

    type: LinkType = "roce"
    count: int = Field(default=1, gt=0)
    attach: Literal["pcie_switch", "host"] = "pcie_switch"


class NetworkSpec(Frozen):
    """Two-tier leaf/spine fabric between nodes."""

    type: LinkType = "roce"
    rail_optimized: bool = True
    nodes_per_leaf: int = Field(default=32, gt=0)
    spines: int = Field(default=8, ge=0)
    oversubscription: float = Field(default=1.0, gt=0)
    bandwidth: Bandwidth | None = None
    latency: Latency = 0.0


class TopologySpec(Frozen):
    """The validated content of one topology YAML file."""

    name: str = "topology"
    description: str | None = None
    gpu: str = "gpu"
    nodes: int = Field(default=1, gt=0)
    gpus_per_node: int = Field(gt=0)
    nvlink: NVLinkSpec | None = None
    pcie: PcieSpec
    nic: NicSpec | None = None
    network: NetworkSpec = NetworkSpec()


@dataclass(frozen=True)
class Link:
    """One direction of an edge."""

    bandwidth: float
    latency: float
    kind: str


def link_attrs(spec: LinkSpec) -> dict[str, Any]:
    return {"bandwidth": spec.bandwidth, "latency": spec.latency, "kind": spec.type}


def ecmp_hash(src: int, dst: int) -> int:
    """A fixed 64-bit mix of (src, dst) (splitmix64 finaliser): stable across runs/processes."""
    x = (src * 0x9E3779B97F4A7C15 + dst + 1) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 31)


class NodeTemplate:
    """One node's internal wiring with local names (``gpu3``, ``nvsw``, ``pcie1``, ...)."""

    def __init__(self, spec: TopologySpec) -> None:
        self.spec = spec
        self.gpus = spec.gpus_per_node
        self.nics = spec.nic.count if spec.nic else 0
        self.graph = nx.Graph()
        self.graph.add_edges_from(self.edges())
        for name in self.graph.nodes:
            self.graph.nodes[name]["kind"] = local_kind(name)
        self._paths: dict[tuple[str, str], tuple[str, ...]] = {}

    def edges(self) -> Iterator[tuple[str, str, dict[str, Any]]]:
        spec, pcie = self.spec, self.spec.pcie
        for i in range(self.gpus):
            if spec.nvlink is not None:
                yield f"gpu{i}", "nvsw", link_attrs(spec.nvlink)
            yield f"gpu{i}", f"pcie{i * pcie.switches // self.gpus}", link_attrs(pcie.link)
        for s in range(pcie.switches):
            yield f"pcie{s}", "host", link_attrs(pcie.up)
        for k in range(self.nics):
            up = "host" if spec.nic and spec.nic.attach == "host" else None
            parent = up or f"pcie{k * pcie.switches // self.nics}"
            yield f"nic{k}", parent, link_attrs(pcie.up if up else pcie.link)

    def nic_of(self, local_gpu: int) -> int:
        return local_gpu * self.nics // self.gpus

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
    Graph nodes are named ``n{node}/{local}`` inside nodes, ``leaf{group}.{rail}`` and
    ``spine{s}`` outside; every graph node has a ``kind`` attribute and every edge has
    ``bandwidth`` (bytes/s per direction), ``latency`` (s) and ``kind`` (link type).
    """

    def __init__(self, spec: TopologySpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.nodes = spec.nodes
        self.gpus_per_node = spec.gpus_per_node
        self.num_gpus = spec.nodes * spec.gpus_per_node
        self.template = NodeTemplate(spec)
        self.groups = -(-spec.nodes // spec.network.nodes_per_leaf)
        nics = self.template.nics
        self.rails = nics if spec.network.rail_optimized else min(1, nics)
        self.spines = spec.network.spines if self.num_leaves > 1 else 0
        self._routes: dict[tuple[int, int], tuple[LinkId, ...]] = {}
        self.check_connected()

    # ------------------------------------------------------------------ construction
    @cached_property
    def graph(self) -> nx.Graph:
        """The whole fabric as a graph, grown on first use: routes and link lookups do not
        need it (at 131,072 GPUs it takes seconds and hundreds of MB)."""
        return self.build_graph()

    @property
    def num_leaves(self) -> int:
        return self.groups * self.rails

    def leaf_of(self, node: int, nic: int) -> str:
        rail = nic if self.spec.network.rail_optimized else 0
        return f"leaf{node // self.spec.network.nodes_per_leaf}.{rail}"

    def spine_link(self) -> LinkSpec:
        """Leaf-spine link: as given, else the leaf's nominal downlink / (ratio * spines)."""
        net, nic = self.spec.network, self.spec.nic
        uplink = net.bandwidth
        if uplink is None and nic is not None:
            ports = net.nodes_per_leaf * (1 if net.rail_optimized else nic.count)
            uplink = ports * nic.bandwidth / (net.oversubscription * self.spines)
        return LinkSpec(type=net.type, bandwidth=uplink or 0.0, latency=net.latency)

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
        graph.add_nodes_from(
            ((self.leaf_of(g * self.spec.network.nodes_per_leaf, r), {"kind": "leaf"})
             for g in range(self.groups) for r in range(self.rails)),
        )
        if self.spec.nic is not None:
            nic = link_attrs(self.spec.nic)
            graph.add_edges_from(
                (f"n{a}/nic{k}", self.leaf_of(a, k), nic)
                for a in range(self.nodes)
                for k in range(tmpl.nics)
            )
        if not self.spines:
            return graph
        graph.add_nodes_from((f"spine{s}", {"kind": "spine"}) for s in range(self.spines))
        up = link_attrs(self.spine_link())
        leaves = [n for n, k in graph.nodes(data="kind") if k == "leaf"]
        graph.add_edges_from((leaf, f"spine{s}", up) for leaf in leaves for s in range(self.spines))
        return graph

    def check_connected(self) -> None:
        """Connectivity, checked on a copy of at most ``nodes_per_leaf + 1`` nodes.

        Every node is the same template wired the same way, so a fabric of two leaf groups
        (where it has two or more) is connected exactly when the full one is: it has the
        same rails, the same spines, and each node joins its leaves as in the full graph.
        """
        small = min(self.nodes, self.spec.network.nodes_per_leaf + 1)
        if small == self.nodes:
            graph = self.graph
        else:
            graph = Topology(self.spec.model_copy(update={"nodes": small})).graph
        parts = nx.number_connected_components(graph)
        if parts != 1:
            raise InputError(
                "topology", self.name, f"a connected graph (this one has {parts} components)"
            )

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

    def route_nodes(self, src: int, dst: int) -> list[str]:
        (a, i), (b, j) = divmod(src, self.gpus_per_node), divmod(dst, self.gpus_per_node)
        tmpl = self.template
        if a == b:
            return [f"n{a}/{n}" for n in tmpl.path(f"gpu{i}", f"gpu{j}")] if i != j else []
        if tmpl.nics == 0:
            raise InputError("topology", self.name, f"NICs for inter-node routes ({src}->{dst})")
        k, m = tmpl.nic_of(i), tmpl.nic_of(j)
        hops = [f"n{a}/{n}" for n in tmpl.path(f"gpu{i}", f"nic{k}")]
        leaf_a, leaf_b = self.leaf_of(a, k), self.leaf_of(b, m)
        hops.append(leaf_a)
        if leaf_a != leaf_b:
            hops += [f"spine{ecmp_hash(src, dst) % self.spines}", leaf_b]
        hops += [f"n{b}/{n}" for n in tmpl.path(f"nic{m}", f"gpu{j}")]
        return hops

    def link(self, link_id: LinkId) -> Link:
        """A link's numbers from the spec (the same as the graph's edge data, without it)."""
        data = self.link_attrs(*link_id)
        return Link(float(data["bandwidth"]), float(data["latency"]), str(data["kind"]))

    def link_attrs(self, u: str, v: str) -> Mapping[str, Any]:
        """Edge data of (u, v): node-internal edges from the template, NIC-leaf edges from
        the NIC spec, leaf-spine edges from :meth:`spine_link` (see :meth:`build_graph`)."""
        (a, _, x), (b, _, y) = u.partition("/"), v.partition("/")
        if x and y:
            if a != b:
                raise KeyError((u, v))
            return dict(self.template.graph.edges[x, y])
        if u.startswith("spine") or v.startswith("spine"):
            return link_attrs(self.spine_link())
        if self.spec.nic is None:
            raise KeyError((u, v))
        return link_attrs(self.spec.nic)

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

    def fabric(self) -> Fabric:
        """The numbers the analytical cost models need (see :class:`Fabric`).

        ``intra_latency``: GPU 0 -> GPU 1 of a node. ``inter_latency``: GPU 0 of one node to
        GPU 0 of a neighbouring node (same rail and leaf when the fabric allows it);
        ``inter_bw``: one NIC port divided by the oversubscription ratio.
        """
        spec, nic = self.spec, self.spec.nic
        intra = spec.nvlink or spec.pcie.link
        intra_lat = self.latency(self.route(0, 1)) if self.gpus_per_node > 1 else intra.latency
        return Fabric(
            gpus_per_node=self.gpus_per_node,
            nodes=self.nodes,
            intra_kind="nvswitch" if spec.nvlink else "pcie",
            intra_bw=intra.bandwidth,
            intra_latency=intra_lat,
            inter_bw=nic.bandwidth / spec.network.oversubscription if nic else 0.0,
            inter_latency=self.inter_latency(),
            nics_per_node=self.template.nics,
            pcie_bridge_bw=spec.pcie.up.bandwidth,
            pcie_switches=spec.pcie.switches,
            oversubscription=spec.network.oversubscription,
            nvls=bool(spec.nvlink and spec.nvlink.nvls),
            leaf_nodes=spec.network.nodes_per_leaf,
            rail_optimized=spec.network.rail_optimized,
        )

    def inter_latency(self) -> float:
        """Latency between neighbouring nodes; with one node, what a second node would see."""
        if self.spec.nic is None:
            return 0.0
        if self.nodes > 1:
            return self.latency(self.route(0, self.gpus_per_node))
        tmpl = self.template
        local = tmpl.path("gpu0", f"nic{tmpl.nic_of(0)}")
        hops = sum(tmpl.graph.edges[u, v]["latency"] for u, v in pairwise(local))
        return 2.0 * (float(hops) + self.spec.nic.latency)


# ----------------------------------------------------------------------------- loading


def shipped_topologies() -> list[str]:
    return sorted(p.stem for p in (ROOT / "topologies").glob("*.yaml"))


def merge_params(data: dict[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """Overlay ``params`` (nested mappings or dotted keys) on a raw topology mapping."""
    out = dict(data)
    for key, value in params.items():
        head, _, rest = str(key).partition(".")
        if rest:
            value = {rest: value}
        old = out.get(head)
        if isinstance(value, Mapping) and isinstance(old, Mapping):
            value = merge_params(dict(old), value)
        out[head] = value
    return out


def read_spec(spec: str | Path) -> dict[str, Any]:
    path = Path(spec)
    found = path if path.is_file() else resolve_path(str(spec), Path.cwd(), "topologies", SUFFIXES)
    if found is None:
        names = ", ".join(shipped_topologies())
        raise InputError("topology", str(spec), f"an existing YAML file or one of: {names}")
    raw = read_yaml(found, "topology")
    if not isinstance(raw, Mapping):
        raise InputError("topology", str(spec), "a YAML mapping")
    return dict(raw)


def load_topology(
    spec: str | Path | Mapping[str, Any], params: Mapping[str, Any] | None = None
) -> Topology:
    """Read (a shipped name, a path or a mapping), apply ``params``, validate and grow it."""
    raw = dict(spec) if isinstance(spec, Mapping) else read_spec(spec)
    data = merge_params(raw, params or {})
    parsed: TopologySpec = validate(TopologySpec, data, "topology.")
    return Topology(parsed)
