"""Fast mode reads the fabric the flow model reads: fan-out, oversubscription in force,
rails and an expected ECMP spine-collision factor; a quick fast/detailed consistency suite."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import simpy
from reference.ecmp import monte_carlo_factor

from libra_des.hardware.collectives.alltoall import Mechanisms
from libra_des.hardware.collectives.ecmp import (
    collision_factor,
    expected_max,
    stage_overlap_warning,
)
from libra_des.hardware.costs import CostModel
from libra_des.hardware.fabric.topology import load_topology, shipped_topologies
from libra_des.hardware.profiles.profile import load_profile
from libra_des.hardware.variance.model import VarianceModel
from libra_des.sim.network.flow.flow_model import Network
from libra_des.sim.network.models import NetworkSetup, flow_topology, flows

MIB = 1 << 20
#: Fast mode's all-to-all without PXN: cross-rail messages climb to the spine (the tests that
#: need spine traffic on one leaf group; the flow model then routes the same way).
NO_PXN = Mechanisms(pxn=False)


def test_collision_factor_matches_enumeration_of_three_balls_in_two_bins() -> None:
    # 8 placements: (3,0) twice, (2,1) six times -> E[max] = 18/8, mean 1.5.
    assert expected_max(3, 2) == pytest.approx(2.25, rel=1e-9)
    assert collision_factor(3, 2) == pytest.approx(1.5, rel=1e-9)
    assert collision_factor(10, 1) == 1.0


@pytest.mark.parametrize(("flows", "bins", "groups"),
                         [(10, 4, 1), (56, 8, 1), (392, 8, 16), (1568, 8, 16), (3000, 8, 2)])
def test_collision_factor_matches_a_monte_carlo_of_the_same_hashing(
    flows: int, bins: int, groups: int
) -> None:
    mc = monte_carlo_factor(flows, bins, groups, 800, np.random.default_rng(7))
    assert collision_factor(flows, bins, groups) == pytest.approx(mc, rel=0.015)


def test_more_flows_per_uplink_collide_less() -> None:
    factors = [collision_factor(f, 8, 4) for f in (16, 64, 256, 1024)]
    assert factors == sorted(factors, reverse=True) and factors[-1] > 1.0


def fast_and_flows(
    name: str, params: dict[str, object], per_gpu: float, on: Mechanisms | None = None
) -> tuple[float, float]:
    """A uniform all-to-all filling the cluster: fast mode's seconds with the mechanisms
    ``on`` (the default ones: PXN on) and the flow model's on the same routes."""
    topo = load_topology(name, params)
    n = topo.num_gpus
    cost = CostModel(load_profile("h200-sxm"), topo.fabric(), efficiency=False)
    cost.a2a_on = on or Mechanisms()
    fast = cost.collective("all_to_all", per_gpu * n, n, topo.gpus_per_node).seconds
    env = simpy.Environment()
    # The flow model as a run builds it: the cost model's rates for its flows (stretch.py).
    net = flows(env, NetworkSetup(topo, cost, VarianceModel.none()))
    env.run(net.collective("all_to_all", list(range(n)), per_gpu * n))
    return fast, env.now


SUITE = [(name, {"nodes": 2 if name.startswith("gb200") else 8}) for name in shipped_topologies()]
SUITE += [("h200-roce-railopt", {"nodes": 8, "levels.1.fan_out": 4}),
          ("h200-roce-railopt-2to1", {"nodes": 8, "levels.1.fan_out": 4})]


@pytest.mark.parametrize(("name", "params"), SUITE, ids=[f"{n}-{p}" for n, p in SUITE])
def test_fast_and_detailed_agree_within_ten_percent(name: str, params: dict[str, object]) -> None:
    """Every shipped topology, a uniform all-to-all filling it, PXN on in both modes where
    the fabric has it (docs/communication.md)."""
    fast, flows = fast_and_flows(name, params, 64 * MIB)
    assert flows / fast == pytest.approx(1.0, abs=0.10)


def test_detailed_pxn_keeps_cross_rail_messages_off_the_spine() -> None:
    """Two leaf groups of 4:1 rail leaves: without PXN in the flow model, 7 of 8 messages
    of a node pair inside a group climb the oversubscribed spine and detailed is much slower
    than fast mode's PXN (it breaks if the flow model's PXN is switched off)."""
    params = {"nodes": 8, "levels.1.fan_out": 4, "levels.1.oversubscription": 4}
    fast, relayed = fast_and_flows("h200-roce-railopt", params, 64 * MIB)
    _, direct = fast_and_flows("h200-roce-railopt", params, 64 * MIB, NO_PXN)
    assert relayed / fast == pytest.approx(1.0, abs=0.10)
    assert direct > 1.3 * relayed


def test_fan_out_changes_the_fast_all_to_all_where_the_fabric_changes() -> None:
    # Without PXN cross-rail messages climb to the spine (with it, at 1:1, the NIC binds).
    one_group, _ = fast_and_flows("h200-roce-railopt", {"nodes": 8}, 64 * MIB, NO_PXN)
    two_groups, _ = fast_and_flows("h200-roce-railopt", {"nodes": 8, "levels.1.fan_out": 4},
                                   64 * MIB, NO_PXN)
    assert two_groups > 1.1 * one_group


def test_p2p_between_nodes_of_one_leaf_runs_at_line_rate() -> None:
    params = {"nodes": 4, "levels.1.fan_out": 2, "levels.1.oversubscription": 4}
    fabric = load_topology("h200-roce-railopt", params).fabric()
    assert fabric.pair_bw(0, 8) == pytest.approx(50e9)      # same rail, same leaf
    assert fabric.pair_bw(0, 16) == pytest.approx(12.5e9)   # same rail, other leaf group
    assert fabric.pair_bw(0, 9) == pytest.approx(12.5e9)    # cross-rail: up to the spine


def test_fabric_layout_names_leaves_spines_uplinks_and_the_ratio_in_force() -> None:
    small = load_topology("h200-roce-railopt", {"nodes": 8, "levels.1.oversubscription": 4})
    lay = small.layout()
    assert (lay["leaves"], lay["spines"], lay["uplinks_per_leaf"]) == (8, 8, 8)
    # 8 of the leaf's 32 provisioned ports in use: the 4:1 leaf carries them at 1:1.
    assert lay["nominal_oversubscription"] == 4.0 and lay["oversubscription"] == 1.0
    full = load_topology("h200-roce-railopt", {"nodes": 32, "levels.1.oversubscription": 4})
    assert full.layout()["oversubscription"] == 4.0


def test_quickstart_fast_result_moves_with_the_fan_out() -> None:
    from libra_des.commands.run import simulate
    from libra_des.config import ROOT, load_scenario

    def step(fan_out: int) -> float:
        sc = load_scenario(ROOT / "scenarios" / "quickstart.yaml", [
            "parallelism.dp=2", "parallelism.pp=2", "parallelism.gbs=8", "balancer.pool_size=2",
            "model.layers=4",
            "workload.packed_length=65536", "variance.enabled=false",
            f"topology_params.levels.1.fan_out={fan_out}"])
        res, _ = simulate(sc)
        return float(res["step_time_s"]["mean"])

    assert step(1) != step(32)


def test_cost_breakdown_names_the_ecmp_factor_and_it_slows_the_spine() -> None:
    topo = load_topology("h200-roce-railopt", {"nodes": 8, "levels.1.fan_out": 4})
    cost = CostModel(load_profile("h200-sxm"), topo.fabric())
    cost.a2a_on = NO_PXN  # cross-rail messages on the spine too: more flows collide
    out = cost.explain("all_to_all", 64 * MIB * 64, 64, 8)
    breakdown = out["breakdown"]
    assert isinstance(breakdown, dict)
    factor = breakdown["ecmp"]["factor"]
    assert factor > 1.2
    # Without collisions (per-packet spraying) the same exchange is faster, by at most R
    # (the NIC, which every message crosses, is a bottleneck of its own).
    model, _ = cost.inter_a2a(64, 8)
    sprayed = replace(model, on=replace(model.on, ecmp=1.0))
    per_peer = np.full(1, 64 * MIB)
    ratio = model.uniform(64, 8, per_peer)[0] / sprayed.uniform(64, 8, per_peer)[0]
    assert 1.1 < ratio <= factor


def test_spine_and_leaf_traffic_drain_at_once_not_one_after_the_other() -> None:
    """2:1 leaves, 2 nodes: 7/8 of a rank's peers cross the spine at half the line rate;
    the rank's time is the spine share's, not the spine share's plus the leaf-local one's."""
    topo = load_topology("h200-roce-railopt-2to1", {"nodes": 32})
    cost = CostModel(load_profile("h200-sxm"), replace(topo.fabric(), spines=1),
                     efficiency=False)
    cost.a2a_on = NO_PXN
    model, _ = cost.inter_a2a(16, 8)
    per_peer = float(64 * MIB)
    spine_only = 7 * per_peer / 25e9  # 7 cross-rail peers on the other node at 25 GB/s
    assert model.uniform(16, 8, np.full(1, per_peer))[0] == pytest.approx(spine_only, rel=0.02)


def test_warns_where_stages_share_an_oversubscribed_leaf() -> None:
    params = {"nodes": 32, "levels.1.oversubscription": 4}
    fabric = load_topology("h200-roce-railopt", params).fabric()
    assert stage_overlap_warning(replace(fabric, busy_nodes=8), replays=False)
    assert stage_overlap_warning(replace(fabric, busy_nodes=32), replays=False) is None
    assert stage_overlap_warning(replace(fabric, busy_nodes=8), replays=True) is None


def test_intra_node_all_to_all_runs_at_nccls_p2p_rate_in_both_fidelities() -> None:
    """Inside one NVSwitch node fast mode prices an all-to-all on the datasheet tier at
    NCCL's p2p rate (its p2p channels: 329.6 of 450 GB/s on H200); the flow model's
    intra-node flows run at the same rate (stretched as incast stretches cross-node ones),
    so the two agree. (A measured curve brings its own link rate: both then use the port's.)"""
    from libra_des.sim.network.models import intra_a2a_rate

    topo = load_topology("h200-8x-nvswitch", {})
    datasheet = load_profile("h200-sxm").model_copy(update={"fits": ()})
    cost = CostModel(datasheet, topo.fabric())
    assert intra_a2a_rate(cost, 8) == pytest.approx(329.6e9)  # below line rate: a real test
    ranks, size = list(range(8)), 64 * MIB * 8
    fast = cost.collective("all_to_all", size, 8, 8).seconds
    env = simpy.Environment()
    env.run(flows(env, NetworkSetup(topo, cost, VarianceModel.none())).collective(
        "all_to_all", ranks, size))
    assert env.now == pytest.approx(fast, rel=0.05)
    line = simpy.Environment()  # the links' own rate: the gap this closes
    line.run(Network(line, flow_topology(topo, cost)).collective("all_to_all", ranks, size))
    assert line.now < 0.85 * fast
