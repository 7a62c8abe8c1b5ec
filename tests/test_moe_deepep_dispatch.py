"""DeepEP kernels in the MoE dispatch and combine stages: a cross-node EP scenario runs with
them and prices its exchange differently from NCCL's all-to-all; byte counts by hand; the
knob refused where the run would ignore it or DeepEP does not run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from libra_des.cli import main
from libra_des.config import load_scenario
from libra_des.hardware.collectives import deepep
from libra_des.hardware.costs import CostModel
from libra_des.hardware.fabric.topology import load_topology, read_spec
from libra_des.hardware.profiles.profile import load_profile
from libra_des.results.moe_metrics import simulate_moe
from libra_des.sim.network.analytic import AnalyticNetwork

REPO = Path(__file__).resolve().parents[1]
TWO_NODES = REPO / "scenarios" / "moe-ep-2node-h100-ib-ndr.yaml"
SMALL = ["model.layers=4", "workload.batch=8", "workload.batches=1", "variance.enabled=false",
         "balancer.policy=sglang", "balancer.dispatch=all2all"]


def run(*overrides: str) -> dict[str, Any]:
    return simulate_moe(load_scenario(TWO_NODES, [*SMALL, *overrides]),
                        np.random.default_rng(0))


def test_two_node_ep_runs_with_deepep_and_prices_it_differently() -> None:
    nccl = run()
    normal = run("balancer.dispatch_kernel=deepep_normal")
    low = run("balancer.dispatch_kernel=deepep_low_latency")
    assert "dispatch_kernel" not in nccl and normal["dispatch_kernel"] == "deepep_normal"
    # The normal kernels forward over NVLink what crossed once per node: more bytes in all
    # (RDMA copy plus forwards), a different exchange time.
    assert normal["bytes_moved"]["dispatch"] > nccl["bytes_moved"]["dispatch"]
    # Low latency sends one message per pair: at least NCCL's one copy per GPU.
    assert low["bytes_moved"]["dispatch"] >= nccl["bytes_moved"]["dispatch"]
    times = {r["moe_layer_s"] for r in (nccl, normal, low)}
    assert len(times) == 3


def test_send_matrix_by_hand_with_a_replica_destination() -> None:
    # 16 GPUs on 2 nodes of 8. Token 0 on GPU 0: pairs placed on GPUs 9, 9, 10 (node 1) and
    # 1 (node 0). Token 1 on GPU 3: pairs on GPUs 11 and 12 (node 1). 100 bytes a token.
    dest = np.array([[9, 9, 10, 1], [11, 12, 12, 12]])
    origin = np.array([0, 3])
    m = deepep.send_matrix(deepep.NORMAL, dest, origin, 16, 8, 100.0)
    # Token 0: RDMA 0 -> 8 once, NVLink 8 -> 9, 8 -> 10, 0 -> 1. Token 1: RDMA 3 -> 11 once
    # (the relay needs it itself), NVLink 11 -> 12.
    want = {(0, 8): 100, (8, 9): 100, (8, 10): 100, (0, 1): 100, (3, 11): 100, (11, 12): 100}
    assert {(int(a), int(b)): float(m[a, b]) for a, b in zip(*np.nonzero(m), strict=True)} == want
    ll = deepep.send_matrix(deepep.LOW_LATENCY, dest, origin, 16, 8, 100.0)
    assert ll[0, 9] == 200 and ll[3, 12] == 300 and ll.sum() == 800  # one message a pair


def test_fast_network_prices_the_matrix_as_the_kernel() -> None:
    spec = {**read_spec("h100-ib-ndr"), "nodes": 4}
    cost = CostModel(load_profile("h100-sxm"), load_topology(spec).fabric())
    net = AnalyticNetwork(__import__("simpy").Environment(), cost)
    # 4096 tokens of GPU 0, each to GPUs 9, 17 and 25: RDMA-bound, to three peers at once
    # (GPUs 8, 16, 24), which NCCL's all-to-all would serve in rounds.
    m = deepep.send_matrix(deepep.NORMAL, np.array([[9, 17, 25]] * 4096),
                           np.zeros(4096, dtype=int), 32, 8, 7168 * 2.0)
    gpus = list(range(32))
    got = net.collective_seconds("all_to_all", gpus, 0.0, "deepep_normal", m)
    node = np.arange(32) // 8
    local = node[:, None] == node[None, :]
    assert got == pytest.approx(deepep.seconds(cost, deepep.NORMAL, np.where(local, 0, m),
                                               np.where(local, m, 0), 8))
    assert got != pytest.approx(net.collective_seconds("all_to_all", gpus, 0.0, None, m))


@pytest.mark.parametrize("extra", [
    ["balancer.policy=libra", "balancer.dispatch=auto"],  # Libra dispatches by AllGather
    ["topology=pcie-8x", "topology_params={gpu: H200-NVL}", "parallelism.ep=8",
     "profile_scope=borrowed"],  # no NVLink
])
def test_deepep_where_it_would_be_ignored_or_cannot_run_is_bad_input(
        extra: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    sets = [x for s in [*SMALL, "balancer.dispatch_kernel=deepep_normal", *extra]
            for x in ("--set", s)]
    code = main(["run", str(TWO_NODES), "--out", str(tmp_path / "out"), *sets])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("error: balancer.dispatch_kernel:") and "\n" not in err, err


@pytest.mark.parametrize("kernel", [deepep.NORMAL, deepep.LOW_LATENCY])
def test_fast_and_detailed_agree_on_a_deepep_exchange(kernel: deepep.EpKernel) -> None:
    """4 nodes of 8 H100, 512 tokens a GPU routed uniformly to 8 GPUs: the flow model runs the
    kernel's matrix as one coflow (no NCCL incast share, NVLink at NCCL's p2p rate where the
    fast model prices it so), within 20% of the fast model's price."""
    import simpy

    from libra_des.hardware.variance.model import VarianceModel
    from libra_des.sim.network.models import NetworkSetup, flows

    topo = load_topology("h100-ib-ndr", {"nodes": 4})
    n = topo.num_gpus
    cost = CostModel(load_profile("h100-sxm"), topo.fabric())
    rng = np.random.default_rng(0)
    dest = rng.integers(0, n, size=(512 * n, 8))
    m = deepep.send_matrix(kernel, dest, np.repeat(np.arange(n), 512), n, 8, 7168 * 2.0)
    gpus = list(range(n))
    fast = AnalyticNetwork(simpy.Environment(), cost).collective_seconds(
        "all_to_all", gpus, 0.0, kernel.name, m)
    env = simpy.Environment()
    net = flows(env, NetworkSetup(topo, cost, VarianceModel.none()))
    env.run(net.collective("all_to_all", gpus, algorithm=kernel.name, send_bytes=m))
    assert env.now == pytest.approx(fast, rel=0.2)
