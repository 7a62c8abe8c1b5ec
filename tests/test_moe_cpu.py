"""Host (CPU) stages priced as their serving stacks run them (``sim.moe.host``): Python loop
iterations, torch ops with their per-call overhead, copies and launches, each count checked by
hand on a small case; the torch implementations the calibration times make those calls."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from libra_des.hardware.profiles.profile import HostOverheads, Sourced
from libra_des.sim.moe import host

HAS_TORCH = importlib.util.find_spec("torch") is not None


def test_greedy_moves_structure_by_hand() -> None:
    # G = 2, E = 4, 3 moves: 3 loop iterations; 2 + 24 x 3 = 74 torch ops; a clone and a row
    # sum over 8 counts (16 elements), then per move 5 x 2 + 4 = 14 elements: 16 + 42 = 58;
    # one copy of a GPU's row of 4 int32 counts (16 bytes).
    stage = host.greedy_moves(2, 4, 3)
    assert stage == host.HostStage(python_iterations=3, torch_ops=74, element_ops=58, copies=1,
                                   copy_bytes=16.0)


def test_replica_placement_structure_by_hand() -> None:
    # G = 2, E = 4, 5 replicas: 5 iterations; 3 + 23 x 5 = 118 ops; set-up 2 x 8 + 2 = 18
    # elements, then 9 x 2 + 4 = 22 per replica: 18 + 110 = 128.
    stage = host.replica_placement(2, 4, 5)
    assert stage == host.HostStage(python_iterations=5, torch_ops=118, element_ops=128,
                                   copies=1, copy_bytes=16.0)
    # Libra: 3 replicas in the vectorised phase 1 first (4 ops over 2 x 8 + 2 x 3 = 22
    # elements), then the 5 placed one per iteration: 122 ops, 150 elements.
    stage = host.replica_placement(2, 4, 5, vectorised=3)
    assert (stage.python_iterations, stage.torch_ops, stage.element_ops) == (5, 122, 150)


def test_path_lookup_structure_by_hand() -> None:
    # 10 tokens, top-2, 4 experts: no Python loop; 6 ops over 20 ids + 16 table cells + 8;
    # the 20 int32 ids copied to the host (80 bytes).
    stage = host.path_lookup(10, 4, 2)
    assert stage == host.HostStage(torch_ops=6, element_ops=44, copies=1, copy_bytes=80.0)


def test_metadata_launches_and_eplb_structure_by_hand() -> None:
    assert host.metadata(64.0) == host.HostStage(copies=1, syncs=1, copy_bytes=64.0)
    assert host.layer_launches(18) == host.HostStage(torch_ops=18, launches=18)
    # 2 layers, 4 experts, 1 redundant, 2 GPUs: 2 + 1 + 2 x 5 x 3 = 33 iterations; 5 ops;
    # 1 x 2 x 2 x 4 = 16 elements; the [2, 4] load copied once (32 bytes).
    assert host.eplb_rebalance(2, 4, 1, 2) == host.HostStage(
        python_iterations=33, torch_ops=5, element_ops=16, copies=1, copy_bytes=32.0)


def test_price_sums_every_call_kind() -> None:
    prices = host.HostPrices(1.0, 10.0, 100.0, 1000.0, 10000.0, {})
    stage = host.HostStage(1, 2, 3, 4, 5, 6, copy_bytes=host.HOST_BW)
    assert prices.compute_seconds(stage) == 1 + 20 + 300
    assert prices.seconds(stage) == 1 + 20 + 300 + 4000 + 110000 + 1


def overheads(torch_op_s: float) -> HostOverheads:
    src = "test"
    return HostOverheads(cpu="test CPU", python_iteration_s=Sourced(value=4e-8, source=src),
                         torch_op_s=Sourced(value=torch_op_s, source=src),
                         element_op_s=Sourced(value=1e-9, source=src))


def test_price_grows_with_the_torch_op_knob() -> None:
    stage = host.greedy_moves(8, 128, 16)
    cheap, dear = (host.HostPrices.of(overheads(t)) for t in (1e-7, 1e-6))
    assert dear.seconds(stage) - cheap.seconds(stage) == pytest.approx(stage.torch_ops * 9e-7)
    assert cheap.sources["torch_op_s"] == ("measured", "profile host block: test CPU")
    # Without a profile block: the defaults, each naming its tier.
    tiers = {name: tier for name, (tier, _) in host.HostPrices.of(None).sources.items()}
    assert tiers["copy_s"] == "assumption" and tiers["torch_op_s"] == "measured"


@pytest.mark.skipif(not HAS_TORCH, reason="the calibration's implementations need torch")
def test_structure_counts_match_the_torch_implementations() -> None:
    from libra_des.calibrate import host as impl

    data = impl.inputs(np.random.default_rng(0))
    c, h = data["counts"], data["holders"]
    for moves in (0, 3):
        counted = impl.count_ops(lambda m=moves: impl.greedy_moves(c, h, m))
        assert counted == host.greedy_moves(8, 128, moves).torch_ops
    for reps, per_gpu in ((0, 0), (4, 0), (4, 2)):
        counted = impl.count_ops(lambda r=reps, n=per_gpu: impl.place_replicas(c, h, r, n))
        assert counted == host.replica_placement(8, 128, reps, 8 * per_gpu).torch_ops
    counted = impl.count_ops(lambda: impl.path_lookup(data["previous"], data["table"], 128))
    assert counted == host.path_lookup(impl.TOKENS, 128, impl.TOP_K).torch_ops
