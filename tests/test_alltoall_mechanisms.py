"""All-to-all at scale: each mechanism of hardware/collectives/alltoall.py is named in ``cost
--json``'s
breakdown, and breaking it (switching it off or altering it) moves the time the way the
mechanism says. Per-GPU time still grows with the node count at fixed per-GPU bytes, and every
path that prices an all-to-all (TAP's exchange, Ulysses, DistCA, the training MoE all-to-all,
MoE dispatch / combine) goes through the same model."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import libra_des
from libra_des.cli import main
from libra_des.config import ROOT
from libra_des.hardware.collectives.a2a_incast import incast_share
from libra_des.hardware.collectives.alltoall import QP_CACHE, InterNodeA2A, Mechanisms
from libra_des.hardware.collectives.ecmp import spine_view
from libra_des.hardware.costs import CostModel
from libra_des.hardware.fabric.topology import load_topology, shipped_topologies
from libra_des.hardware.profiles.profile import load_profile

NETWORKED = [t for t in shipped_topologies() if load_topology(t).fabric().nodes > 1]
MECHANISMS = {"message_size_efficiency", "per_peer_latency_s", "qp_miss_per_message_s",
              "pxn", "incast", "ecmp", "spine_share", "one_nic_per_gpu_gbs", "node_share_s"}


def cost(topology: str, nodes: int | None = None, **on: object) -> CostModel:
    params = {} if nodes is None else {"nodes": nodes}
    model = CostModel(load_profile("h200-sxm"), load_topology(topology, params).fabric())
    model.a2a_on = dataclasses.replace(Mechanisms(), **on)  # type: ignore[arg-type]
    return model


def a2a(model: CostModel, n: int, nbytes: float) -> float:
    return model.collective("all_to_all", nbytes, n).seconds


def breakdown(topology: str, n: int, nbytes: int, capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["cost", "--op", "all_to_all", "--group", str(n), "--bytes", str(nbytes),
                 "--topology", topology, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_every_mechanism_is_named_in_cost_json(capsys: pytest.CaptureFixture[str]) -> None:
    out = breakdown("h200-roce-railopt-2to1", 64, 2**26, capsys)
    assert set(out["breakdown"]) >= MECHANISMS
    assert out["breakdown"]["ecmp"]["factor"] == 1.0  # the slot the routing model fills
    assert out["breakdown"]["seconds"] == pytest.approx(out["seconds"])


def test_message_size_efficiency_falls_as_the_pool_widens(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Fixed per-GPU bytes: 64 KiB messages on 16 GPUs (Simple), 4 KiB on 256 (LL, half rate)."""
    narrow = breakdown("h200-roce-railopt", 16, 2**20, capsys)["breakdown"]
    wide = breakdown("h200-roce-railopt", 256, 2**20, capsys)["breakdown"]
    assert (narrow["protocol"], wide["protocol"]) == ("Simple", "LL")
    assert wide["message_size_efficiency"] == pytest.approx(
        narrow["message_size_efficiency"] / 2)
    assert wide["incast_share"] == pytest.approx(incast_share(32))
    # Broken: without it small messages move at the large-message rate.
    on, off = cost("h200-roce-railopt"), cost("h200-roce-railopt", size_efficiency=False)
    assert a2a(off, 256, 2**20) < a2a(on, 256, 2**20)
    assert a2a(off, 16, 2**20) == a2a(on, 16, 2**20)  # large messages: no change


def test_per_peer_cost_grows_with_the_peer_count() -> None:
    model = cost("h200-roce-railopt")
    small, large = (model.inter_a2a(n, 8)[0] for n in (256, 2048))
    assert small.qp_miss(256, 8) == 0.0 < large.qp_miss(2048, 8)  # beyond the QP cache
    assert (2048 - 8) * 2 > QP_CACHE >= (256 - 8) * 2
    # Broken: without per-peer costs a tiny all-to-all costs only the once-paid latency.
    off = cost("h200-roce-railopt", per_peer=False)
    assert a2a(off, 256, 256 * 8) < a2a(model, 256, 256 * 8)
    assert a2a(off, 256, 256 * 8) == pytest.approx(small.once, rel=0.05)


def test_pxn_keeps_cross_rail_messages_off_the_oversubscribed_spine(
    capsys: pytest.CaptureFixture[str],
) -> None:
    on = breakdown("h200-roce-railopt-2to1", 64, 2**28, capsys)["breakdown"]
    assert on["pxn"] == {"on": True, "rerouted_share": pytest.approx(7 / 8)}
    assert on["spine_share"] == 0.0
    with_pxn, without = cost("h200-roce-railopt-2to1"), cost("h200-roce-railopt-2to1", pxn=False)
    assert a2a(without, 64, 2**28) > 1.8 * a2a(with_pxn, 64, 2**28)
    # Its NVLink hop is priced: a starved NVLink makes the PXN route the bottleneck.
    model, _ = with_pxn.inter_a2a(64, 8)
    slow_hop = dataclasses.replace(model, hop_bw=model.nic_bw / 10)
    p = np.array([2**28 / 64])
    assert slow_hop.uniform(64, 8, p)[0] > model.uniform(64, 8, p)[0]
    # Not on a fabric whose NICs are not rail-optimised.
    assert not cost("h100-ib-ndr").inter_a2a(64, 8)[0].pxn or cost(
        "h100-ib-ndr").fabric.rail_optimized


def test_incast_the_hottest_receiver_decides() -> None:
    model = cost("h200-roce-railopt")
    n = 32
    hot = np.full((n, n), 1e6)
    hot[:, 0] = 16e6  # everyone sends sixteen times as much to rank 0
    off = cost("h200-roce-railopt", incast=False)
    assert model.all_to_allv(hot, 8) > 2 * off.all_to_allv(hot, 8)
    even = np.full((n, n), 1e6)
    assert model.all_to_allv(even, 8) == off.all_to_allv(even, 8)  # symmetric: no incast


def test_ecmp_factor_slows_only_spine_crossing_messages() -> None:
    """A collision factor on messages leaving their leaf. Across two leaf groups half of a
    rank's peers cross the spine; its uplinks (1:1) bind once the factor passes 2 (the NIC
    carries every message, the uplinks half of them: the slower of the two decides)."""
    model = cost("h200-roce-railopt", 64, ecmp=1.0)
    headroom, collide = (cost("h200-roce-railopt", 64, ecmp=f) for f in (1.5, 3.0))
    inside, across = 8 * 32, 8 * 64  # one leaf group of 32 nodes, then two
    assert a2a(collide, inside, 2**28) == a2a(model, inside, 2**28)
    assert a2a(headroom, across, 2**28) == a2a(model, across, 2**28)  # the NIC still binds
    assert a2a(collide, across, 2**28) > 1.15 * a2a(model, across, 2**28)


def test_ecmp_factor_is_the_fast_models_and_breaking_it_moves_the_time(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Two leaf groups of the 2:1 fabric: the breakdown names the layout's expected collision
    factor (balls into bins, hardware/collectives/ecmp.py); set to 1 (no collisions) the time
    falls."""
    out = breakdown("h200-roce-railopt-2to1", 512, 2**30, capsys)["breakdown"]
    fabric = load_topology("h200-roce-railopt-2to1").fabric()
    assert out["ecmp"]["factor"] == pytest.approx(spine_view(fabric, 512, 8, True)[1])
    assert out["ecmp"]["factor"] > 1.05 and out["spine_share"] > 0.5
    factor = out["ecmp"]["factor"]
    model, sprayed = (cost("h200-roce-railopt-2to1", 64, **on) for on in ({}, {"ecmp": 1.0}))
    assert model.inter_a2a(512, 8)[0].ecmp == factor
    # Slower by at most the factor: the per-message latencies are not divided.
    slow, fast = a2a(model, 512, 2**30), a2a(sprayed, 512, 2**30)
    assert 1.02 * fast < slow <= factor * fast


@pytest.mark.parametrize("topology", NETWORKED)
def test_per_gpu_time_grows_with_nodes_at_fixed_per_gpu_bytes(topology: str) -> None:
    model = cost(topology, 32)
    g = model.fabric.gpus_per_node
    times = [a2a(model, g * nodes, 2**26) for nodes in (2, 8, 32)]
    assert times[0] < times[1] < times[2], (topology, times)


def test_every_all_to_all_path_uses_the_one_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """TAP's exchange, Ulysses, DistCA and the MoE dispatch all price cross-node all-to-alls
    through InterNodeA2A (stack: matrices; uniform: the collective)."""
    calls: list[str] = []
    stack, uniform = InterNodeA2A.stack, InterNodeA2A.uniform

    def counted_stack(self: InterNodeA2A, inter: np.ndarray, gpn: int) -> np.ndarray:
        calls.append("stack")
        return stack(self, inter, gpn)

    def counted_uniform(self: InterNodeA2A, n: int, gpn: int, p: np.ndarray) -> np.ndarray:
        calls.append("uniform")
        return uniform(self, n, gpn, p)

    monkeypatch.setattr(InterNodeA2A, "stack", counted_stack)
    monkeypatch.setattr(InterNodeA2A, "uniform", counted_uniform)
    # CP 16 over two nodes: every pool's exchange crosses nodes.
    small = ["parallelism.dp=2", "parallelism.cp=16", "parallelism.pp=1", "parallelism.gbs=4",
             "balancer.pool_size=2", "workload=longctx-256k", "model.layers=2", "steps=1"]
    for policy in ("libra", "ulysses", "distca"):
        calls.clear()
        libra_des.simulate(ROOT / "scenarios" / "quickstart.yaml",
                           [*small, f"balancer.policy={policy}"])
        assert "stack" in calls, policy
    calls.clear()
    libra_des.simulate(ROOT / "scenarios" / "moe-ep-2node-h200-roce-railopt.yaml",
                       ["workload.batches=1", "model.layers=1", "balancer.policy=sglang"])
    assert "stack" in calls


@pytest.mark.parametrize("topology", ["h200-roce-railopt", "h200-roce-railopt-2to1",
                                      "h100-ib-3tier", "a100-dgx-ib-hdr"])
@pytest.mark.parametrize("per_peer", [4096.0, 1e6])
def test_uniform_closed_form_equals_the_matrix_form(topology: str, per_peer: float) -> None:
    """The collective's closed form (counts per rate class) against the same uniform matrix
    priced message by message, across leaf groups, with PXN and LL sizes."""
    model = cost(topology, 80)
    g = model.fabric.gpus_per_node
    for nodes in (2, 40, 80):
        n = g * nodes
        inter, _ = model.inter_a2a(n, g)
        node = np.arange(n) // g
        matrix = np.where(node[:, None] != node[None, :], per_peer, 0.0)
        closed = inter.uniform(n, g, np.array([per_peer]))[0]
        assert closed == pytest.approx(inter.stack(matrix[None], g)[0], rel=1e-12), nodes
