"""N-level fabrics: the level list, routes through every level, per-level oversubscription,
collectives decomposed over levels (closed forms, conservation of bytes), new topologies."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from libra_des.config import ROOT, load_scenario
from libra_des.errors import InputError
from libra_des.hardware.collectives.communication import Communication
from libra_des.hardware.collectives.hierarchy import bytes_per_rank, decompose, level_ranks
from libra_des.hardware.fabric.topology import load_topology, read_spec, shipped_topologies
from libra_des.hardware.profiles.profile import load_profile
from libra_des.kinds.simulation import simulate

NIC = 50e9  # 400 Gb/s per port in the shipped files
#: h100-ib-3tier with 2:1 leaves and 3:1 spines: leaf groups of 16 nodes, pods of 64.
OVERSUB = {"levels.1.oversubscription": 2, "levels.2.oversubscription": 3}


def three_tier(nodes: int = 128, **params: Any) -> Any:
    return load_topology("h100-ib-3tier", {"nodes": nodes, **OVERSUB, **params})


def test_two_level_files_still_load_as_the_same_levels() -> None:
    legacy = {
        "name": "h200-roce-railopt", "gpu": "H200-SXM", "nodes": 40, "gpus_per_node": 8,
        "nvlink": {"bandwidth": "450GB/s", "latency": "0.5us", "nvls": True},
        "pcie": {"switches": 4, "link": {"type": "pcie", "bandwidth": "64GB/s",
                                         "latency": "0.5us"}},
        "nic": {"type": "roce", "count": 8, "bandwidth": "400Gb/s", "latency": "1.5us"},
        "network": {"type": "roce", "nodes_per_leaf": 32, "spines": 8, "latency": "1us"},
    }
    old = load_topology(legacy)
    new = load_topology("h200-roce-railopt", {"nodes": 40})
    assert [lv.type for lv in old.spec.levels] == ["nvswitch", "rail_leaf", "spine"]
    assert old.fabric() == new.fabric()
    assert old.route(3, 300) == new.route(3, 300)
    assert set(old.graph.edges) == set(new.graph.edges)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (("levels.1.bandwidth", 0), "topology.levels[1].bandwidth"),
        (("levels.1.type", "spine"), "topology.levels[1].type"),
        (("levels.3.oversubscription", 2), "topology.levels[3].oversubscription"),
        (("levels.2.type", "core"), "topology.levels[3].type"),  # two core levels
        (("levels.0.nics", 0), "topology.levels[0].nics"),
        (("levels.1.type", "carrier-pigeon"), "topology.levels[1]"),
        (("levels.1.colour", "blue"), "topology.levels[1].colour"),
        (("levels.7.fan_out", 2), "topology_params.levels.7"),
    ],
)
def test_bad_levels_are_one_line_errors_naming_the_field(change: tuple[str, Any],
                                                          field: str) -> None:
    with pytest.raises(InputError) as info:
        load_topology("h100-ib-3tier", dict([change]))
    assert info.value.field == field and "\n" not in info.value.line()


def test_routes_climb_only_as_high_as_they_must() -> None:
    topo = three_tier()
    def levels_on(src: int, dst: int) -> list[str]:
        hops = [v for _, v in topo.route(src, dst)]
        assert all(topo.graph.has_edge(u, v) for u, v in topo.route(src, dst))
        return [topo.graph.nodes[v]["kind"] for v in hops if "/" not in v]
    gpn = 8
    assert levels_on(0, 5 * gpn) == ["leaf"]  # same rail, same leaf group
    assert levels_on(0, 5 * gpn + 1) == ["leaf", "spine", "leaf"]  # another rail
    assert levels_on(0, 40 * gpn) == ["leaf", "spine", "leaf"]  # same pod
    assert levels_on(0, 100 * gpn) == ["leaf", "spine", "core", "spine", "leaf"]  # next pod
    cores = {v for s, d in itertools.product(range(0, 64 * gpn, 64), range(64 * gpn, 128 * gpn, 64))
             for _, v in topo.route(s, d) if v.startswith("core")}
    assert cores == {f"core{c}" for c in range(8)}, "ECMP spreads over every core switch"


def test_each_levels_oversubscription_shows_in_the_cross_level_bandwidth() -> None:
    topo = three_tier()
    leaf_up = topo.link(("leaf0.0", "spine0.0")).bandwidth
    spine_up = topo.link(("spine0.0", "core0")).bandwidth
    assert leaf_up == pytest.approx(16 * NIC / (2 * 8))  # 16 NICs down, 2:1, 8 spines
    assert spine_up == pytest.approx(4 * 8 * leaf_up / (3 * 8))  # 32 leaves down, 3:1, 8 cores
    fabric = topo.fabric()
    assert fabric.inter_bw == pytest.approx(NIC / 6) and fabric.oversubscription == 6
    rates = [fabric.rail_bw(nodes) for nodes in (2, 16, 17, 64, 65, 128)]
    assert rates == pytest.approx([NIC, NIC, NIC / 2, NIC / 2, NIC / 6, NIC / 6])


def test_all_to_all_messages_move_at_their_levels_rate() -> None:
    comm = Communication(load_profile(None), three_tier().fabric(), efficiency=False)
    m = 1e9
    alpha = comm.fabric.inter_latency
    # Expected spine collisions (hardware/collectives/ecmp.py).
    ecmp = comm.inter_a2a(128, 1)[0].ecmp
    for dst_node, rate in ((40, NIC / 2), (100, NIC / 6)):
        # Every node of leaf group 0 sends one message that far: each NIC then has its
        # share of the leaf's (and pod's) uplinks, which the levels' rates describe.
        send = np.zeros((128, 128))
        for i in range(16):
            send[i, dst_node + i] = m
        want = alpha + m * max(ecmp, 1.0) / rate  # datasheet curve (efficiency 1)
        assert comm.all_to_allv(send, 1) == pytest.approx(want, rel=1e-12)
    # One message alone on its leaf: the NIC's line rate binds (its flow takes one uplink,
    # which is as fast as a NIC here), as in the flow model.
    send = np.zeros((128, 128))
    send[0, 40] = m
    assert comm.all_to_allv(send, 1) == pytest.approx(alpha + m / NIC, rel=1e-12)


@pytest.mark.parametrize("ks", [(8, 16, 4, 2), (4, 3, 5), (2, 2, 2, 2, 2), (8, 7)])
def test_decomposition_moves_the_flat_rings_bytes(ks: tuple[int, ...]) -> None:
    levels = [(k, 0) for k in ks]
    n, size = math.prod(ks), 3.0e8
    flat = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n,
            "reduce_scatter": (n - 1) / n}
    for op, factor in flat.items():
        steps = decompose(op, levels)
        assert bytes_per_rank(steps, size) == pytest.approx(factor * size, rel=1e-12)
    ar = decompose("all_reduce", levels)
    assert [s.op for s in ar] == (["all_reduce"] + ["reduce_scatter"] * (len(ks) - 2)
                                  + ["all_reduce"] + ["all_gather"] * (len(ks) - 2))


def test_three_level_all_reduce_matches_its_closed_form() -> None:
    """One rank per node over 128 nodes: 16 per leaf group, 4 groups per pod, 2 pods.
    Datasheet curves (efficiency 1): each network step's cheapest algorithm is the one-step
    direct reduce-scatter / all-gather and the two-step all-reduce (ring and direct tie)."""
    topo = three_tier()
    comm = Communication(load_profile(None), topo.fabric(), efficiency=False)
    size = 4.0e9
    alpha = topo.fabric().inter_latency
    got = comm.collective("all_reduce", size, 128, 1, algorithm="multilevel").seconds
    leaf = 2 * (alpha + (15 / 16) * size / NIC)  # reduce-scatter + all-gather in the group
    pod = 2 * (alpha + (3 / 4) * (size / 16) / (NIC / 2))  # ... among the pod's 4 groups
    top = 2 * alpha + 2 * (1 / 2) * (size / 64) / (NIC / 6)  # all-reduce across the 2 pods
    assert got == pytest.approx(leaf + pod + top, rel=1e-12)
    flat = comm.collective("all_reduce", size, 128, 1, algorithm="ring").seconds
    assert flat == pytest.approx(2 * 127 * alpha + 2 * (127 / 128) * size / (NIC / 6))
    assert got < flat / 3, "most bytes stay below the oversubscribed levels"


def test_multilevel_is_the_hierarchical_collective_within_one_leaf_group() -> None:
    comm = Communication(load_profile(None), three_tier().fabric())
    for op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast"):
        for group in (16, 64, 128):
            two = comm.collective(op, 1e8, group, 8, algorithm="hierarchical").seconds
            multi = comm.collective(op, 1e8, group, 8, algorithm="multilevel").seconds
            assert two == multi  # 16 nodes at most: one leaf group
    levels = level_ranks(three_tier().fabric(), 1024, 8, every_level=True)
    assert levels == [(8, 0), (16, 16), (4, 64), (2, 128)]


def test_multilevel_is_never_chosen_automatically() -> None:
    comm = Communication(load_profile(None), three_tier().fabric())
    assert comm.collective("all_reduce", 1e9, 1024, 8).algorithm != "multilevel"
    with pytest.raises(InputError):
        comm.collective("all_to_all", 1e9, 1024, 8, algorithm="multilevel")


def test_every_shipped_topology_is_a_level_list() -> None:
    for name in shipped_topologies():
        assert "levels" in read_spec(name), name


def test_shipped_gb200_rack_is_one_72_gpu_nvlink_domain() -> None:
    topo = load_topology("gb200-nvl72")
    fabric = topo.fabric()
    assert (fabric.gpus_per_node, fabric.intra_bw, fabric.nvls) == (72, 900e9, True)
    assert [v for _, v in topo.route(0, 71)] == ["n0/nvsw", "n0/gpu71"]
    assert fabric.nics_per_node == 72 and fabric.inter_bw == NIC


def scenario(name: str, sets: list[str]) -> dict[str, Any]:
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    from test_scenarios import reduced

    path = ROOT / "scenarios" / f"{name}.yaml"
    result, _ = simulate(load_scenario(path, [*reduced(path), *sets]))
    return result


def test_training_runs_on_gb200_racks() -> None:
    res = scenario("quickstart", ["topology=gb200-nvl72", "topology_params.nodes=2"])
    assert res["step_time_s"]["mean"] > 0 and 0 < res["mfu"] < 1


def test_moe_runs_on_a_three_tier_fat_tree_across_pods() -> None:
    # One node per leaf group and per pod: every cross-node message climbs to the core.
    sets = ["topology=h100-ib-3tier", "topology_params.nodes=2",
            "topology_params.levels.1.fan_out=1", "topology_params.levels.2.fan_out=1",
            "topology_params.levels.2.oversubscription=4"]
    res = scenario("moe-ep-2node-h200-roce-railopt", sets)
    base = scenario("moe-ep-2node-h200-roce-railopt", sets[:2])
    assert res["moe_layer_s"] > base["moe_layer_s"] > 0, "a 4:1 core slows the dispatch"
