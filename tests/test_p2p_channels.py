"""NCCL's execution and point-to-point channels, and the NVLink p2p rate they give, by hand.

Rules (NVIDIA/nccl ``src/graph/connect.cc`` ncclTopoPostset, ``src/graph/paths.cc``
ncclTopoGetNchannels / ncclTopoComputeP2pChannels): NCCL runs twice the channels its search
found; p2p channels are those rounded up to a power of two; a peer over NVLink gets 2 channels
per NVLink link (so each p2p channel is counted at half a link: 20.6 / 2 GB/s on Hopper); a
network peer max(1 NIC, NIC rate / 14 GB/s) channels, halved while channels per peer x
ceil(ranks / 8) exceed the p2p channels.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from libra_des.hardware.costs import CostModel
from libra_des.hardware.fabric.topology import load_topology
from libra_des.hardware.profiles.profile import load_profile

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "vidur-profiles"


def bare(profile: str, topology: str) -> CostModel:
    prof = load_profile(profile).model_copy(update={"fits": (), "samples": ()})
    return CostModel(prof, load_topology(topology, {}).fabric())


def test_execution_channels_of_a_ring_of_8() -> None:
    """H200 node (18 NVLink-4 links credited 20.6 GB/s: 370.8 GB/s): the search finds 6
    channels at 60 GB/s (6 x 60 = 360 <= 370.8), duplicates them to 12 x 30; NCCL runs 24."""
    t = bare("h200-sxm", "h200-8x-nvswitch").tuner
    assert (t.ring_graph(1, 8).channels, t.ring_graph(1, 8).bw) == (12, 30.0)
    assert t.execution_channels(1, 8) == 24
    assert t.p2p_channels(1, 8) == 32  # 24 rounded up to a power of two


def test_p2p_rate_over_nvlink_is_channels_times_half_a_link() -> None:
    t = bare("h200-sxm", "h200-8x-nvswitch").tuner
    assert t.p2p_nvlink_gbs(8) == pytest.approx(min(370.8, 32 * 20.6 / 2))  # 329.6
    assert t.p2p_nvlink_gbs(8, channels=16) == pytest.approx(16 * 10.3)
    assert t.p2p_nvlink_gbs(8, channels=64) == pytest.approx(370.8)  # the NVLink bounds it


def test_p2p_channels_per_network_peer() -> None:
    """A 400 Gb/s NIC (50 GB/s): ceil(50 / 14) = 4 channels a peer. Across nodes NCCL runs
    16 channels (8 search channels x 2; tests/test_nccl_trees.py), so 16 p2p channels: 16
    ranks (2 batches of 8 peers) keep 4 a peer, 64 ranks (8 batches) 2, 128 and more 1."""
    t = bare("h200-sxm", "h200-roce-railopt").tuner
    assert t.p2p_channels(2, 8) == 16
    assert t.p2p_net_channels_per_peer(16, 8) == 4
    assert t.p2p_net_channels_per_peer(64, 8) == 2  # 4 x 8 batches = 32 > 16: halved
    assert t.p2p_net_channels_per_peer(128, 8) == 1
    assert t.p2p_net_channels_per_peer(256, 8) == 1


def test_sm_count_moves_the_nvlink_bound_all_to_all() -> None:
    """Half the channels (SMs) halve the rate of an NVLink-bound all-to-all."""
    m = bare("h200-sxm", "h200-8x-nvswitch")
    full = m.collective("all_to_all", 2**30, 8).seconds
    m.p2p_channels = 16
    m.answers.clear()
    half = m.collective("all_to_all", 2**30, 8).seconds
    assert half / full == pytest.approx(2.0, rel=0.01)


def sendrecv_gbs(name: str) -> float:
    """The largest intra-node send_recv of a Vidur file (GB/s)."""
    path = DATA / name
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    rows = [r for r in csv.DictReader(path.open()) if r["devices_per_node"] == "2"]
    big = max(rows, key=lambda r: float(r["size"]))
    return float(big["size"]) / (float(big["time_stats.send_recv.median"]) * 1e-3) / 1e9


@pytest.mark.parametrize(("profile", "topology", "log"), [
    ("h100-sxm", "h100-ib-ndr", "h100_dgx_send_recv.csv"),
    ("a100-sxm", "a100-dgx-ib-hdr", "a100_dgx_send_recv.csv"),
])
def test_intra_node_send_recv_against_vidur(profile: str, topology: str, log: str) -> None:
    """64 MiB between two GPUs of a DGX node: H100 measured 348 GB/s (model 329.6: NCCL's
    32 p2p channels at 10.3 GB/s), A100 228 GB/s (model 240: the credited NVLink, 12 x 20);
    both within 10%, where the datasheet line rate (450 and 300 GB/s) was 29% and 31% fast."""
    measured = sendrecv_gbs(log)
    m = bare(profile, topology)
    size = 64 * 2**20
    model = size / m.p2p(size, True) / 1e9
    assert abs(model / measured - 1) < 0.10, (model, measured)
    assert m.fabric.intra_bw / 1e9 / measured > 1.25  # the line rate was far off


def test_an_overlapped_exchange_takes_nccls_p2p_channels() -> None:
    """The SMs an overlapped point-to-point exchange holds: NCCL's p2p channels, 32 on an
    H200 node (24 execution channels rounded up), so a GEMM keeps 132 - 32 SMs."""
    from libra_des.hardware.compute.interference import overlap_model, p2p_channels

    m = bare("h200-sxm", "h200-8x-nvswitch")
    assert p2p_channels(m, 8) == 32
    model = overlap_model(m, None, None)
    assert model.sm_factor(p2p_channels(m, 8)) == pytest.approx(132 / 100)
