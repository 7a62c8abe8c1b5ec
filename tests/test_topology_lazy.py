"""The topology's graph-free link lookups and reduced connectivity check against the graph."""

from __future__ import annotations

import networkx as nx
import pytest

from libra_des.errors import InputError
from libra_des.hardware.fabric.topology import Link, load_topology, shipped_topologies


@pytest.mark.parametrize("name", shipped_topologies())
@pytest.mark.parametrize("nodes", [1, 3, 9])
def test_link_lookup_equals_graph_edge_data(name: str, nodes: int) -> None:
    topo = load_topology(name, {"nodes": nodes, "levels.1.fan_out": 2})
    # Up to (nodes of the largest bounded unit) + 1 nodes the check itself grows the graph.
    small = nodes <= 1 + max((t.span for t in topo.tiers if t.spec.fan_out), default=nodes)
    assert small or "graph" not in vars(topo)  # routes and fabric numbers need no graph
    topo.fabric()
    assert small or "graph" not in vars(topo)
    for u, v, d in topo.graph.edges(data=True):
        want = Link(float(d["bandwidth"]), float(d["latency"]), str(d["kind"]))
        assert topo.link((u, v)) == want and topo.link((v, u)) == want


@pytest.mark.parametrize("spines", [0, 1])
@pytest.mark.parametrize("nodes", [1, 2, 3, 5])
def test_reduced_connectivity_check_agrees_with_full_graph(spines: int, nodes: int) -> None:
    params = {"nodes": nodes, "levels.1.fan_out": 2, "levels.2.count": spines}
    try:
        topo = load_topology("h200-roce-railopt", params)
    except InputError:
        connected = False
    else:
        connected = True
        assert nx.number_connected_components(topo.graph) == 1
    # The full graph, grown from a topology that skips the check, decides the same.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("libra_des.hardware.fabric.topology.Topology.check_connected", lambda self: None)
        full = load_topology("h200-roce-railopt", params)
    assert (nx.number_connected_components(full.graph) == 1) == connected
