"""DeepEP-class dispatch: hierarchical forwarding deduplicates per node and GPU; the
low-latency kernels send one message per remote pair."""

from __future__ import annotations

import numpy as np
import pytest

from libra_des.errors import InputError
from libra_des.hardware.collectives import deepep


def test_a_token_crosses_to_a_node_once_and_reaches_each_gpu_once() -> None:
    # 16 GPUs on 2 nodes, 32 experts (2 a GPU). Token 0 on GPU 0 picks experts on GPUs 9, 9,
    # 10 (node 1) and GPU 1 (its own node).
    routed = np.array([[18, 19, 20, 2]])
    origin = np.array([0])
    rdma, nvlink = deepep.normal_traffic(routed, origin, 32, 16, 8, 1.0)
    assert rdma.sum() == 1 and rdma[0, 8] == 1  # one copy to the same-rail GPU of node 1
    assert nvlink[8, 9] == 1 and nvlink[8, 10] == 1 and nvlink[0, 1] == 1
    assert nvlink.sum() == 3
    ll = deepep.low_latency_traffic(routed, origin, 32, 16, 1.0)
    assert ll[0, 9] == 2 and ll[0, 10] == 1 and ll[0, 1] == 1  # no deduplication


def test_ep_wider_than_the_experts_is_bad_input() -> None:
    with pytest.raises(InputError) as err:
        deepep.expert_gpu(128, 256)
    assert err.value.line().startswith("error: parallelism.ep: got '256'")


def test_sm_budgets() -> None:
    assert deepep.NORMAL.sms == 24 and deepep.LOW_LATENCY.sms == 0


def test_low_latency_splits_nvlink_peers_from_rdma_peers() -> None:
    # 16 GPUs on 2 nodes of 8, 16 experts (1 a GPU). GPU 0 sends one token to experts 1 (its
    # node: NVLink) and 9, 10 (node 1: RDMA): 1000 bytes each. Hand count: the NIC of GPU 0
    # carries 2000 bytes, its NVLink 1000.
    from libra_des.hardware.costs import CostModel
    from libra_des.hardware.fabric.topology import load_topology, read_spec
    from libra_des.hardware.profiles.profile import load_profile

    m = deepep.low_latency_traffic(np.array([[1, 9, 10]]), np.array([0]), 16, 16, 1000.0)
    assert m.sum() == 3000 and m[0, 1] == m[0, 9] == m[0, 10] == 1000
    cost = CostModel(load_profile("h100-sxm"),
                     load_topology({**read_spec("h100-ib-ndr"), "nodes": 2}).fabric())
    got = deepep.seconds(cost, deepep.LOW_LATENCY, m, m * 0, 8)
    want = max(cost.p2p(2000.0, same_node=False), cost.p2p(1000.0, same_node=True))
    assert got == pytest.approx(want)
    # The normal kernels' RDMA stage streams the busiest NIC's volume as one transfer.
    rd = np.zeros((16, 16))
    rd[0, 8] = 5e6
    assert deepep.seconds(cost, deepep.NORMAL, rd, rd * 0, 8) >= cost.p2p(5e6, same_node=False)
