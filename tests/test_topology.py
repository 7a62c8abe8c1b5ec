"""Topologies: shipped files, parametric growth, routes, fabric numbers, bad-file errors."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from libra_des.errors import InputError
from libra_des.hardware.fabric.topology import (
    load_topology,
    parse_bandwidth,
    parse_latency,
    shipped_topologies,
)

SHIPPED = (
    "h200-8x-nvswitch",
    "h200-roce-railopt",
    "h200-roce-railopt-2to1",
    "h100-ib-ndr",
    "a100-dgx-ib-hdr",
    "pcie-8x",
)


def small_spec(**changes: Any) -> dict[str, Any]:
    """Two 4-GPU nodes, NVSwitch inside, one NIC per GPU, one leaf group."""
    spec: dict[str, Any] = {
        "name": "tiny",
        "nodes": 2,
        "gpus_per_node": 4,
        "nvlink": {"bandwidth": "100GB/s", "latency": "1us"},
        "pcie": {"switches": 2, "link": {"type": "pcie", "bandwidth": "32GB/s"}},
        "nic": {"count": 4, "bandwidth": "200Gb/s", "latency": "2us"},
        "network": {"spines": 2},
    }
    spec.update(changes)
    return spec


def test_every_required_topology_ships_and_loads() -> None:
    assert set(SHIPPED) <= set(shipped_topologies())
    for name in SHIPPED:
        topo = load_topology(name)
        assert nx.is_connected(topo.graph)
        assert topo.num_gpus == topo.nodes * topo.gpus_per_node


def test_datasheet_numbers_reach_the_fabric() -> None:
    h200 = load_topology("h200-roce-railopt").fabric()
    assert (h200.intra_kind, h200.intra_bw, h200.inter_bw) == ("nvswitch", 450e9, 50e9)
    assert h200.nics_per_node == 8 and h200.nvls
    a100 = load_topology("a100-dgx-ib-hdr").fabric()
    assert (a100.intra_bw, a100.inter_bw, a100.nvls) == (300e9, 25e9, False)
    pcie = load_topology("pcie-8x").fabric()
    assert pcie.intra_kind == "pcie" and pcie.intra_bw == 32e9 and pcie.nics_per_node == 1
    two_to_one = load_topology("h200-roce-railopt-2to1").fabric()
    assert two_to_one.oversubscription == 2 and two_to_one.inter_bw == 25e9


def test_pcie_box_has_no_nvlink_and_crosses_the_host_bridge() -> None:
    topo = load_topology("pcie-8x")
    kinds = Counter(k for _, k in topo.graph.nodes(data="kind"))
    assert kinds["nvswitch"] == 0 and kinds["pcie_switch"] == 2 and kinds["host"] == 1
    assert {d["kind"] for *_, d in topo.graph.edges(data=True)} <= {"pcie", "ethernet"}
    near = [v for _, v in topo.route(0, 3)]
    far = [v for _, v in topo.route(0, 7)]
    assert near == ["n0/pcie0", "n0/gpu3"]
    assert far == ["n0/pcie0", "n0/host", "n0/pcie1", "n0/gpu7"]


def test_graph_grows_with_nodes_512() -> None:
    topo = load_topology("h200-roce-railopt", {"nodes": 512})
    kinds = Counter(k for _, k in topo.graph.nodes(data="kind"))
    groups = 512 // 32  # nodes_per_leaf in the file
    assert topo.num_gpus == 4096
    expected = {
        "gpu": 4096,
        "nvswitch": 512,
        "pcie_switch": 4 * 512,
        "host": 512,
        "nic": 8 * 512,
        "leaf": groups * 8,
        "spine": 8,
    }
    assert dict(kinds) == expected
    per_node_edges = 8 + 8 + 4 + 8 + 8  # nvlink, gpu-pcie, pcie-host, nic-pcie, nic-leaf
    assert topo.graph.number_of_edges() == 512 * per_node_edges + groups * 8 * 8


def test_builds_16k_gpus_with_on_demand_routes() -> None:
    # Build time is a benchmark concern (benchmarks/scale.py); here: size and routing only.
    topo = load_topology("h200-roce-railopt", {"nodes": 2048})
    assert topo.num_gpus == 16_384
    route = topo.route(5, 16_383)
    assert route[0][0] == "n0/gpu5" and route[-1][1] == "n2047/gpu7"


def test_routes_are_paths_of_the_graph_between_the_right_gpus() -> None:
    topo = load_topology("h100-ib-ndr", {"nodes": 64})
    for src, dst in [(0, 1), (0, 8), (3, 500), (511, 2), (17, 17)]:
        route = topo.route(src, dst)
        if src == dst:
            assert route == ()
            continue
        assert route[0][0] == topo.gpu_name(src) and route[-1][1] == topo.gpu_name(dst)
        assert all(topo.graph.has_edge(u, v) for u, v in route)
        assert all(a[1] == b[0] for a, b in pairwise(route)), "contiguous"
        inner = [topo.graph.nodes[v]["kind"] for _, v in route[:-1]]
        assert "gpu" not in inner, "GPUs never forward traffic"
        assert topo.route(src, dst) is route, "routes are cached per instance"


def test_intra_node_route_is_the_weighted_shortest_path() -> None:
    topo = load_topology("h200-8x-nvswitch")
    assert [v for _, v in topo.route(2, 6)] == ["n0/nvsw", "n0/gpu6"]
    weight = {e: 1.0 / topo.link(e).bandwidth for e in topo.links}
    sub = topo.graph.subgraph(n for n in topo.graph if n.startswith("n0/"))
    best = nx.dijkstra_path(sub, "n0/gpu2", "n0/gpu6", weight=lambda u, v, _: weight[(u, v)])
    assert [u for u, _ in topo.route(2, 6)] + ["n0/gpu6"] == best


def test_inter_node_routes_use_the_nic_bandwidth() -> None:
    cases = (("h200-roce-railopt", 50e9, "roce"), ("a100-dgx-ib-hdr", 25e9, "infiniband"))
    for name, nic_bw, kind in cases:
        topo = load_topology(name)
        route = topo.route(0, topo.gpus_per_node)  # GPU 0 of node 0 -> GPU 0 of node 1
        nic_links = [e for e in route if topo.link(e).kind == kind]
        assert len(nic_links) == 2, "out through the source NIC, in through the destination NIC"
        assert all(topo.link(e).bandwidth == nic_bw for e in nic_links)
        assert topo.bottleneck(route) == nic_bw


def test_rail_optimised_routes_and_ecmp_across_spines() -> None:
    topo = load_topology("h200-roce-railopt", {"nodes": 64})  # two leaf groups of 32 nodes
    same_rail_same_leaf = [v for _, v in topo.route(3, 8 * 5 + 3)]
    assert not any(v.startswith("spine") for v in same_rail_same_leaf)
    assert "leaf0.3" in same_rail_same_leaf
    spines = Counter()
    for src in range(0, 256, 8):
        for dst in range(256, 512, 8):
            hops = [v for _, v in topo.route(src, dst)]
            used = [v for v in hops if v.startswith("spine")]
            assert len(used) == 1, "different leaf groups meet at exactly one spine"
            spines[used[0]] += 1
    assert set(spines) == {f"spine{s}" for s in range(8)}
    assert max(spines.values()) < 2 * min(spines.values()), f"ECMP is lopsided: {spines}"
    again = load_topology("h200-roce-railopt", {"nodes": 64})
    assert again.route(0, 300) == topo.route(0, 300), "ECMP is deterministic"


def test_oversubscription_halves_the_leaf_uplinks() -> None:
    one = load_topology("h200-roce-railopt", {"nodes": 64})
    two = load_topology("h200-roce-railopt", {"nodes": 64, "levels.1.oversubscription": 2})
    up_one = one.link(("leaf0.0", "spine0")).bandwidth
    up_two = two.link(("leaf0.0", "spine0")).bandwidth
    assert up_one == pytest.approx(32 * 50e9 / 8) and up_two == pytest.approx(up_one / 2)
    nested = load_topology("h200-roce-railopt", {"levels": {"1": {"oversubscription": 2}}})
    assert nested.spec.levels[1].oversubscription == 2
    assert nested.spec.levels[1].fan_out == 32, "nested params merge into the file's level"


def test_one_nic_per_node_is_shared_by_all_gpus() -> None:
    topo = load_topology(small_spec(nic={"count": 1, "bandwidth": "100Gb/s"}))
    for g in range(4):
        nics = [v for _, v in topo.route(g, 4 + g) if topo.graph.nodes[v]["kind"] == "nic"]
        assert nics == ["n0/nic0", "n1/nic0"]
    assert topo.fabric().nics_per_node == 1


def test_units_parse() -> None:
    assert parse_bandwidth("400Gb/s") == 50e9
    assert parse_bandwidth("450 GB/s") == 450e9
    assert parse_latency("500ns") == pytest.approx(5e-7)
    assert parse_latency("2us") == pytest.approx(2e-6)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"nic": None}, "topology"),  # two nodes, no NICs: disconnected
        ({"network": {"spines": 0, "nodes_per_leaf": 1}}, "topology"),  # leaves never meet
        ({"nvlink": {"bandwidth": 0}}, "topology.nvlink.bandwidth"),
        ({"nvlink": {"bandwidth": -5e9}}, "topology.nvlink.bandwidth"),
        ({"nic": {"count": 4, "type": "carrier-pigeon", "bandwidth": 1e9}}, "topology.nic.type"),
        ({"colour": "blue"}, "topology.colour"),
        ({"nvlink": {"bandwidth": "fast"}}, "topology.nvlink.bandwidth"),
        ({"gpus_per_node": 0}, "topology.gpus_per_node"),
    ],
)
def test_bad_topologies_are_one_line_input_errors(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as info:
        load_topology(small_spec(**changes))
    assert info.value.field == field
    assert "\n" not in info.value.line()


def test_bad_files_are_one_line_input_errors(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    listing = tmp_path / "list.yaml"
    listing.write_text("- 1\n- 2\n")
    for spec in ("no-such-topology", str(broken), str(listing)):
        with pytest.raises(InputError) as info:
            load_topology(spec)
        assert info.value.field == "topology" and "\n" not in info.value.line()
    with pytest.raises(InputError):
        load_topology("h200-8x-nvswitch").route(0, 8)  # GPU 8 does not exist


@pytest.mark.parametrize("nodes", [33, 64])
def test_a_fabric_too_small_for_the_job_names_the_missing_level(tmp_path: Path,
                                                                  nodes: int) -> None:
    """A leaf-only file (32 nodes per leaf group) grown past one group has nothing joining
    the groups: the line names the level above the leaf, not a graph's component count."""
    import yaml

    from libra_des.api import shipped_path

    data = yaml.safe_load(shipped_path("topologies/h200-roce-railopt.yaml").read_text())
    fan_out = data["levels"][1]["fan_out"]
    data["levels"] = data["levels"][:2]
    path = tmp_path / "leaf-only.yaml"
    path.write_text(yaml.safe_dump(data))
    load_topology(str(path), {"nodes": fan_out})  # one leaf group: connected
    with pytest.raises(InputError) as err:
        load_topology(str(path), {"nodes": nodes})
    line = err.value.line()
    assert "a level above 'rail_leaf'" in line and f"{nodes} nodes" in line
    assert "component" not in line


def test_a_resized_topology_file_is_noted_in_the_result() -> None:
    """The run grows or shrinks the file's ``nodes:`` to the layout and says so; pinning
    ``topology_params.nodes`` leaves no note."""
    import libra_des.api as api

    tiny = {"parallelism.dp": 2, "parallelism.pp": 2, "parallelism.gbs": 8,
            "balancer.pool_size": 2, "model.layers": 2, "memory.check": "warn"}
    path = api.shipped_path("scenarios/quickstart.yaml")
    scenario = api.load_scenario(path, tiny)
    topo = load_topology(str(scenario.topology))
    file_nodes, need = topo.nodes, -(-scenario.parallelism.gpus // topo.gpus_per_node)
    grown = api.simulate(path, tiny)
    notes = [w for w in grown.data.get("notes", []) if "resized" in w]
    assert file_nodes != need and len(notes) == 1
    assert f"nodes {file_nodes} in the file resized to {need}" in notes[0]
    pinned = api.simulate(path, {**tiny, "topology_params.nodes": need})
    assert not [w for w in pinned.data.get("notes", []) if "resized" in w]
