"""PXN in the flow model: cross-rail point-to-point messages relayed through a proxy GPU of the
sender's node on the destination's rail (hardware/fabric/topology.py, docs/communication.md)."""

from __future__ import annotations

import numpy as np
import pytest
import simpy

from libra_des.hardware.collectives.alltoall import Mechanisms
from libra_des.hardware.costs import CostModel
from libra_des.hardware.fabric.topology import Topology, load_topology
from libra_des.hardware.profiles.profile import load_profile
from libra_des.sim.network.flow.flow_model import Network
from libra_des.sim.network.models import flow_topology

MIB = 1 << 20
#: Two leaf groups of 4 nodes on rail leaves (8 GPUs, 8 NICs a node).
TWO_GROUPS = {"nodes": 8, "levels.1.fan_out": 4}


def hops(topo: Topology, src: int, dst: int) -> list[str]:
    return [v for _, v in topo.p2p_route(src, dst)]


def test_a_cross_rail_message_in_one_leaf_group_stays_off_the_spine_via_its_proxy() -> None:
    topo = load_topology("h200-roce-railopt", TWO_GROUPS)
    relayed = topo.relaying(True)
    src, dst = 0, 8 * 2 + 3  # GPU 0 of node 0 (rail 0) -> GPU 3 of node 2 (rail 3), group 0
    assert any(v.startswith("spine") for v in hops(topo, src, dst)), "direct: rail 0 -> 3"
    route = hops(relayed, src, dst)
    assert relayed.proxy(src, dst) == 3
    assert route[:3] == ["n0/nvsw", "n0/gpu3", "n0/pcie1"], "NVLink to the proxy first"
    assert "n0/nic3" in route and "n0/nic0" not in route, "out on the destination's rail"
    assert not any(v.startswith("spine") for v in route)
    assert "leaf0.3" in route and route[-1] == "n2/gpu3"


def test_across_leaf_groups_the_proxy_route_climbs_on_the_destinations_rail() -> None:
    relayed = load_topology("h200-roce-railopt", TWO_GROUPS).relaying(True)
    route = hops(relayed, 1, 8 * 5 + 6)  # group 0 -> group 1, rail 1 -> rail 6
    assert "n0/gpu6" in route and "leaf0.6" in route and "leaf1.6" in route
    assert sum(v.startswith("spine") for v in route) == 1


@pytest.mark.parametrize(("src", "dst"), [(2, 8 * 3 + 2), (2, 5), (9, 9)])
def test_same_rail_or_same_node_messages_keep_the_direct_route(src: int, dst: int) -> None:
    topo = load_topology("h200-roce-railopt", TWO_GROUPS)
    relayed = topo.relaying(True)
    assert relayed.proxy(src, dst) is None
    assert relayed.p2p_route(src, dst) == topo.route(src, dst)


def test_proxies_spread_a_rails_forwarding_over_its_gpus() -> None:
    """Two GPUs a NIC: sender ``2r + k`` relays through rail ``m``'s GPU ``2m + k``."""
    relayed = load_topology("h200-roce-railopt", {"nodes": 2, "levels.0.nics": 4}).relaying(True)
    proxies = np.array([[relayed.proxy(i, 8 + j) for j in range(8)] for i in range(8)])
    assert proxies[0, 7] == 6 and proxies[1, 7] == 7 and proxies[3, 0] == 1
    assert proxies[2, 2] is None, "GPU 2 and GPU 10 share rail 1"
    counts = np.bincount([p for p in proxies.ravel() if p is not None], minlength=8)
    assert (counts == counts[0]).all(), "every GPU relays as much"


@pytest.mark.parametrize(("name", "params"), [
    ("pcie-8x", {"nodes": 4}),  # no NVLink between a node's GPUs
    ("h200-roce-railopt", {"nodes": 4, "levels.1.type": "leaf"}),  # not rail-optimised
    ("h200-roce-railopt", {"nodes": 4, "levels.0.nics": 1}),  # one rail
])
def test_pxn_does_not_apply_without_rails_or_nvlink(name: str, params: dict[str, object]) -> None:
    topo = load_topology(name, params)
    cost = CostModel(load_profile("h200-sxm"), topo.fabric())
    assert not topo.pxn_capable and flow_topology(topo, cost) is topo
    assert topo.relaying(True).proxy(0, topo.gpus_per_node + 3) is None


def test_the_flow_model_relays_as_the_cost_models_mechanisms_say() -> None:
    topo = load_topology("h200-roce-railopt", TWO_GROUPS)
    cost = CostModel(load_profile("h200-sxm"), topo.fabric())
    assert cost.pxn_in_force() and flow_topology(topo, cost).pxn
    cost.a2a_on = Mechanisms(pxn=False)
    assert not cost.pxn_in_force() and flow_topology(topo, cost) is topo


def test_point_to_point_messages_relay_and_ring_hops_do_not() -> None:
    """A transfer and an all-to-all take the PXN route; a ring's transfers the direct one (a
    ring of 3 nodes closes across rails, and its time does not change with PXN)."""
    topo = load_topology("h200-roce-railopt", {"nodes": 3, "levels.1.oversubscription": 4})
    net = Network(simpy.Environment(), topo.relaying(True))
    direct, _ = net.path(0, 8 + 3)
    relayed, _ = net.path(0, 8 + 3, True)
    assert not np.array_equal(direct, relayed)
    same, _ = net.path(0, 8, True)
    assert same is net.path(0, 8)[0], "one path where PXN changes nothing"

    def ring_time(t: Topology) -> float:
        env = simpy.Environment()
        env.run(Network(env, t).collective("all_reduce", list(range(24)), 64 * MIB))
        return float(env.now)

    assert ring_time(topo.relaying(True)) == ring_time(topo)


def test_replayed_pxn_all_to_alls_match_solving_every_coflow() -> None:
    """Replays key on the group and its matrix; their recorded paths are the PXN ones."""
    topo = load_topology("h200-roce-railopt", {**TWO_GROUPS, "levels.1.oversubscription": 4})
    rng = np.random.default_rng(1)
    gpus = list(range(0, 64, 3))
    matrix = rng.pareto(1.5, (len(gpus), len(gpus))) * MIB

    def run(replay: bool) -> list[float]:
        env = simpy.Environment()
        net = Network(env, topo.relaying(True), replay=replay)
        ends: list[float] = []

        def repeat() -> simpy.events.ProcessGenerator:
            for _ in range(4):
                yield net.collective("all_to_all", gpus, send_bytes=matrix)
                ends.append(env.now)

        env.process(repeat())
        env.run()
        return ends

    assert run(True) == pytest.approx(run(False), rel=1e-9)
