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
