"""Fabrics users ask for: an InfiniBand fat tree with SHARP (NCCL's CollNet) and GB200 NVL72
racks at multi-rack scale. Each loads, runs a small training scenario, and CollNet is
allowed, priced and chosen where NCCL would (hand-checked against its tuning formulas)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from libra_des.config import ROOT, load_scenario
from libra_des.hardware.costs import CostModel
from libra_des.hardware.fabric.topology import load_topology
from libra_des.hardware.profiles.profile import load_profile
from libra_des.kinds.simulation import simulate

GIB = 2**30


def training(sets: list[str]) -> dict[str, Any]:
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    from test_scenarios import reduced

    path = ROOT / "scenarios" / "quickstart.yaml"
    result, _ = simulate(load_scenario(path, [*reduced(path), *sets]))
    return result


def cost(topology: str, nodes: int, nvls: bool = True) -> CostModel:
    fabric = load_topology(topology, {"nodes": nodes}).fabric()
    return CostModel(load_profile("h100-sxm"), replace(fabric, nvls=nvls))


def test_the_topologies_load_with_their_gpu_records() -> None:
    sharp = load_topology("h100-ib-ndr-sharp")
    assert sharp.spec.gpu == "H100-SXM" and sharp.fabric().collnet
    assert not load_topology("h100-ib-ndr").fabric().collnet
    racks = load_topology("gb200-nvl72-multirack", {"nodes": 16})
    fabric = racks.fabric()
    assert racks.spec.gpu == "GB200" and racks.num_gpus == 16 * 72
    assert (fabric.gpus_per_node, fabric.intra_bw, fabric.inter_bw) == (72, 900e9, 50e9)
    assert [lv["type"] for lv in racks.spec.model_dump()["levels"]][1:] == [
        "rail_leaf", "spine", "core"]


@pytest.mark.parametrize("sets", [
    ["topology=h100-ib-ndr-sharp", "topology_params.nodes=8", "profile=h100-sxm"],
    ["topology=gb200-nvl72-multirack", "topology_params.nodes=2", "profile_scope=borrowed"],
])
def test_a_small_training_scenario_runs(sets: list[str]) -> None:
    res = training(sets)
    assert res["step_time_s"]["mean"] > 0 and 0 < res["mfu"] < 1


def test_collnet_priced_as_nccls_tuning_formulas() -> None:
    # 8 nodes of 8 H100, SHARP in the switches. CollNet Direct all_reduce: one channel per
    # NIC head (8), each at the lower of its NVLink share (NCCL's credited NVLink rate / 8)
    # and its NIC (50 GB/s x 0.96); bus bandwidth x 0.85 on Hopper, x 0.5 bus -> algorithm.
    c = cost("h100-ib-ndr-sharp", 8)
    tuner = c.tuner
    assert tuner is not None
    t = tuner.t
    credited = 450 * t["nvlink_credit_gbs"]["hopper"] / t["nvlink_datasheet_gbs"]["hopper"]
    per_channel = min(credited / 8, 50 * 0.96)
    want = 8 * per_channel * t["factors"]["collnet_direct_hopper"] * t["factors"]["tree_bus_to_alg"]
    entries = {(e.algorithm, e.protocol): e for e in tuner.table("all_reduce", 64, 8)}
    assert entries[("collnet_direct", "Simple")].bandwidth_gbs == pytest.approx(want)
    # Chain: the same graph, no Direct factor.
    assert entries[("collnet_chain", "Simple")].bandwidth_gbs == pytest.approx(
        8 * per_channel * t["factors"]["tree_bus_to_alg"])
    # Without SHARP no CollNet entry at all.
    plain = cost("h100-ib-ndr", 8).tuner
    assert plain is not None
    assert not any(a.startswith("collnet") for a in plain.algorithms("all_reduce", 64, 8))


def test_collnet_chosen_where_it_should_be() -> None:
    # NVLink SHARP nodes: NCCL's NVLS across nodes needs the network's SHARP, so it is the
    # large all_reduce's choice only on the SHARP fabric; elsewhere NVLS-tree.
    assert cost("h100-ib-ndr-sharp", 8).collective("all_reduce", GIB, 64, 8).algorithm == "nvls"
    assert cost("h100-ib-ndr", 8).collective("all_reduce", GIB, 64, 8).algorithm == "nvls_tree"
    # Nodes without NVLS: CollNet wins on the SHARP fabric (Direct at mid sizes, Chain for
    # the largest), ring or tree without SHARP, and the SHARP fabric is faster.
    sharp, plain = cost("h100-ib-ndr-sharp", 8, nvls=False), cost("h100-ib-ndr", 8, nvls=False)
    mid = sharp.collective("all_reduce", 2**24, 64, 8)
    big = sharp.collective("all_reduce", GIB, 64, 8)
    assert (mid.algorithm, big.algorithm) == ("collnet_direct", "collnet_chain")
    ref = plain.collective("all_reduce", GIB, 64, 8)
    assert ref.algorithm in ("ring", "tree") and big.seconds < ref.seconds
