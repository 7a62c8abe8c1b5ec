"""Rings and trees across nodes as NCCL's search builds them, and NCCL's ring/tree crossover
on 2 nodes, stated by hand (NVIDIA/nccl ``src/graph/search.cc`` ncclTopoCompute,
ncclTopoDupChannels; ``tuning.cc`` ncclTopoTuneModel, ncclTopoGetAlgoTime).

H100 node (``h100-ib-ndr``): NVLink credited 18 x 20.6 = 370.8 GB/s, 8 NDR NICs at 50 x 0.96 =
48 GB/s. Across nodes the search tries the SM90 network speeds (48, 45, 42, ...): one channel a
NIC at 45 (8 x 45 = 360 <= 370.8; 48 would need 384), and keeps 8 channels (Hopper: no
duplication below 50 GB/s with more than 4 channels). NCCL runs 16.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from libra_des.hardware.collectives.nccl_tuner import NcclTuner
from libra_des.hardware.costs import CostModel
from libra_des.hardware.fabric.topology import load_topology
from libra_des.hardware.profiles.profile import load_profile


def bare(profile: str, topology: str, nodes: int) -> CostModel:
    prof = load_profile(profile).model_copy(update={"fits": (), "samples": ()})
    return CostModel(prof, load_topology(topology, {"nodes": nodes}).fabric())


def test_ring_graph_across_nodes() -> None:
    t = bare("h100-sxm", "h100-ib-ndr", 2).tuner
    g = t.ring_graph(2, 8)
    assert (g.channels, g.bw) == (8, 45.0)
    assert t.execution_channels(2, 8) == 16
    assert t.p2p_channels(2, 8) == 16


def test_tree_raised_on_two_nodes_only() -> None:
    """A100 DGX (HDR NICs 25 x 0.96 = 24 GB/s, NVLink 12 x 20 = 240): rings of 8 x 24; on two
    nodes the tree's intra speed rises to 30 (below 2 x 24, 8 x 30 <= 240), whose all_reduce
    bus bandwidth is 8 x min(30 x 0.92, 23.6 per-channel tree cap) = 188.8, algbw 94.4."""
    t2 = bare("a100-sxm", "a100-dgx-ib-hdr", 2).tuner
    assert (t2.ring_graph(2, 8).channels, t2.ring_graph(2, 8).bw) == (8, 24.0)
    assert t2.tree_graph(2, 8).bw == 30.0
    (simple,) = [e for e in t2.table("all_reduce", 16, 8)
                 if (e.algorithm, e.protocol) == ("tree", "Simple")]
    assert simple.bandwidth_gbs == pytest.approx(8 * min(30 * 0.92, 23.6) * 0.5)
    t4 = bare("a100-sxm", "a100-dgx-ib-hdr", 4).tuner
    assert t4.tree_graph(4, 8).bw == 24.0  # more nodes: the tuner reads bwInter


def test_ring_tree_crossover_on_two_h100_nodes() -> None:
    """NCCL's time per pair: latency + size / (algbw x tree correction). Ring LL128: 16 ranks,
    30 steps, 2 of them across nodes: 14 + 28 x 1.9 + 2 x 4.0 = 75.2 us; algbw min(360 x
    0.92, 8 x 36.7) x 16 / 30 = 156.59 GB/s. Tree LL128: 14 + 2 (7 x 1.25 + 1 x 8.5) = 48.5
    us; algbw (LL128 across nodes: 120/128) min(360 x 0.9375, 8 x 36.7) x 0.5 = 146.8 GB/s,
    times the LL128 correction 0.9 at 16 and 32 MiB (2^18 and 2^19 x 64 B).
    16 MiB: tree 175.5 < ring 182.3 us; 32 MiB: ring 289.5 < tree 302.5 us."""
    m = bare("h100-sxm", "h100-ib-ndr", 2)
    ring_bw = min(360 * 0.92, 8 * 36.7) * 16 / 30
    tree_bw = min(360 * 0.9375, 8 * 36.7) * 0.5 * 0.9
    for size, winner in ((16 * 2**20, "tree"), (32 * 2**20, "ring")):
        ring = 75.2 + size / (1000 * ring_bw)
        tree = 48.5 + size / (1000 * tree_bw)
        assert (min(ring, tree) == tree) == (winner == "tree")
        got = {a: m.tuner.choose("all_reduce", size, 16, 8, algorithm=a, protocol="LL128")
               for a in ("ring", "tree")}
        assert got["ring"] is not None and got["tree"] is not None
        assert got["ring"].seconds * 1e6 == pytest.approx(ring, rel=1e-9)
        assert got["tree"].seconds * 1e6 == pytest.approx(tree, rel=1e-9)
        assert math.isclose(min(ring, tree), min(got["ring"].seconds, got["tree"].seconds) * 1e6,
                            rel_tol=1e-9)


# ---------------------------------------------------------------- trees on 2, 4 and 8 nodes
# NCCL's constants (tuning.cc), written out: per protocol (LL, LL128, Simple).
BASE = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4)}
NVLINK = {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4)}
NET = {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0)}
LL_MAX = (39.0, 39.0, 20.4)  # llMaxBws, x86 Intel row, [1, 2, >2 nodes]
CAPS = {  # per channel, [1, 2, >2 nodes]: perChMaxTreeBw, perChMaxTreeLL128Bw, perChMaxRingLL128Bw
    "hopper": {"tree": (38.7, 41.4, 36.0), "tree_ll128": (36.7, 36.7, 29.0),
               "ring_ll128": (36.7, 36.7, 36.7)},
    "ampere": {"tree": (24.0, 23.6, 17.8), "tree_ll128": (20.0, 20.0, 20.0),
               "ring_ll128": (20.0, 20.0, 20.0)},
}
CORRECTION = (  # treeCorrectionFactor, sizes 64 B x 2^k
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0,
     1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9,
     1.0, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9,
     .9),
)


def hand_tree(gen: str, nodes: int, channels: int, bw: float, p: int) -> tuple[float, float]:
    """(latency us, algorithm bandwidth GB/s) of NCCL's tree all_reduce on 8 GPUs a node: the
    chain of 7 NVLink hops and log2(nodes) network hops, up and down; bus bandwidth x 0.92
    under the per-channel tree cap, then LL / 3.8 under llMaxBw or LL128 x 120/128 under its
    cap; algorithm bandwidth half the bus bandwidth."""
    i = min(nodes, 3) - 1
    lat = BASE["tree"][p] + 2 * (7 * NVLINK["tree"][p] + math.log2(nodes) * NET["tree"][p])
    bus = min(channels * bw * 0.92, channels * CAPS[gen]["tree"][i])
    if p == 0:
        bus = min(bus / 3.8, LL_MAX[i])
    if p == 1:
        bus = min(bus * 120 / 128, channels * CAPS[gen]["tree_ll128"][i])
    return lat, bus * 0.5


def hand_ring(gen: str, nodes: int, channels: int, bw: float, p: int) -> tuple[float, float]:
    """NCCL's ring all_reduce: 2 (n - 1) steps, 2 (nodes - 1) of them across nodes; inside a
    node each step at least the network post overhead (1 us, x3 for Simple)."""
    n, i = 8 * nodes, min(nodes, 3) - 1
    steps, inter = 2 * (n - 1), 2 * (nodes - 1)
    intra = max(NVLINK["ring"][p], 3.0 if p == 2 else 1.0)
    lat = BASE["ring"][p] + (steps - inter) * intra + inter * NET["ring"][p]
    bus = channels * bw
    if p == 0:
        bus = min(LL_MAX[i], bus * 0.5)
    if p == 1:
        bus = min(bus * 0.92, channels * CAPS[gen]["ring_ll128"][i])
    return lat, bus * n / steps


def hand_seconds(alg: str, gen: str, nodes: int, graph: tuple[int, float], size: float) -> float:
    """The fastest protocol's time (ncclTopoGetAlgoTime): tree bandwidth times the correction
    of its power-of-two size, Simple ring latency x 1.4 past 64 B per channel and rank."""
    best = math.inf
    for p in range(3):
        lat, bw = (hand_tree if alg == "tree" else hand_ring)(gen, nodes, *graph, p)
        k = math.floor(math.log2(size / 64))
        if alg == "tree" and 0 <= k < 23:
            bw *= CORRECTION[p][k]
        if alg == "ring" and p == 2 and size / (graph[0] * 8 * nodes) >= 64:
            lat *= 1.4
        best = min(best, lat + size / (1000 * bw))
    return best * 1e-6


# (profile, topology, generation): graphs per node count, (channels, GB/s the tuner reads) of
# the ring and the tree: H100 8 x 45 (module docstring); A100 8 x 24, the tree's bwIntra raised
# to 30 on two nodes (test_tree_raised_on_two_nodes_only).
MACHINES = {
    ("h100-sxm", "h100-ib-ndr", "hopper"): {2: ((8, 45.0), (8, 45.0)), 4: ((8, 45.0), (8, 45.0)),
                                             8: ((8, 45.0), (8, 45.0))},
    ("a100-sxm", "a100-dgx-ib-hdr", "ampere"): {2: ((8, 24.0), (8, 30.0)),
                                                 4: ((8, 24.0), (8, 24.0)),
                                                 8: ((8, 24.0), (8, 24.0))},
}


@pytest.mark.parametrize("nodes", [2, 4, 8])
def test_tree_table_on_h100_nodes(nodes: int) -> None:
    """The tuner's tree cells on 2, 4 and 8 H100 nodes, e.g. 8 nodes, LL128: 14 + 2 (7 x 1.25 +
    3 x 8.5) = 82.5 us; 8 x min(45 x 0.92, 36) = 288 GB/s bus, x 120/128 = 270 above 8 x 29
    = 232, algbw 116."""
    t = bare("h100-sxm", "h100-ib-ndr", nodes).tuner
    cells = {e.protocol: e for e in t.table("all_reduce", 8 * nodes, 8) if e.algorithm == "tree"}
    for p, name in enumerate(("LL", "LL128", "Simple")):
        lat, bw = hand_tree("hopper", nodes, 8, 45.0, p)
        assert cells[name].latency_us == pytest.approx(lat, rel=1e-9)
        assert cells[name].bandwidth_gbs == pytest.approx(bw, rel=1e-9)
        assert cells[name].channels == 8
    if nodes == 8:
        assert cells["LL128"].latency_us == pytest.approx(82.5)
        assert cells["LL128"].bandwidth_gbs == pytest.approx(116.0)


#: log2 of the size from which ring wins at every larger size (hand formulas above).
SWITCH = {"h100-sxm": {2: 25, 4: 25, 8: 27}, "a100-sxm": {2: 24, 4: 25, 8: 26}}


@pytest.mark.parametrize("machine", list(MACHINES))
def test_ring_tree_crossover_on_2_to_8_nodes(machine: tuple[str, str, str]) -> None:
    """NCCL's choice between ring and tree all_reduce at every power of two from 1 KiB to
    4 GiB, as the hand formulas above state, and the size from which NCCL keeps the ring
    (H100: 32 MiB on 2 and 4 nodes, 128 MiB on 8; A100: 16, 32, 64 MiB; on two A100 nodes the
    ring/LL also wins at 256 KiB alone, between tree/LL and tree/LL128)."""
    profile, topology, gen = machine
    for nodes, (ring_g, tree_g) in MACHINES[machine].items():
        t = bare(profile, topology, nodes).tuner
        n = 8 * nodes
        assert (t.ring_graph(nodes, 8).channels, t.ring_graph(nodes, 8).bw) == ring_g
        assert (t.tree_graph(nodes, 8).channels, t.tree_graph(nodes, 8).bw) == tree_g
        hand, model = [], []
        for k in range(10, 33):
            size = float(2**k)
            ring = hand_seconds("ring", gen, nodes, ring_g, size)
            tree = hand_seconds("tree", gen, nodes, tree_g, size)
            got = {a: t.choose("all_reduce", size, n, 8, algorithm=a) for a in ("ring", "tree")}
            assert got["ring"] is not None and got["tree"] is not None
            assert got["ring"].seconds == pytest.approx(ring, rel=1e-9)
            assert got["tree"].seconds == pytest.approx(tree, rel=1e-9)
            hand.append("ring" if ring < tree else "tree")
            model.append("ring" if got["ring"].seconds < got["tree"].seconds else "tree")
        assert model == hand
        switch = 10 + max(i for i, w in enumerate(hand) if w == "tree") + 1
        assert switch == SWITCH[profile][nodes]
        assert hand[0] == "tree" and hand[-1] == "ring"


def test_tree_with_one_gpu_a_node() -> None:
    """One GPU a node: NCCL's search builds PATTERN_TREE (all NIC traffic through that GPU),
    whose bus bandwidth the tuner takes 15% off. H100, 4 nodes: one NIC at 48 GB/s, one channel
    duplicated into 2 x 24; Simple algbw 2 x 24 x 0.92 x 0.85 x 0.5 (below 2 x 36)."""
    t = bare("h100-sxm", "h100-ib-ndr", 4).tuner
    assert (t.tree_graph(4, 1).channels, t.tree_graph(4, 1).bw) == (2, 24.0)
    (simple,) = [e for e in t.table("all_reduce", 4, 1)
                 if (e.algorithm, e.protocol) == ("tree", "Simple")]
    assert simple.bandwidth_gbs == pytest.approx(2 * 24 * 0.92 * 0.85 * 0.5)
    (ring,) = [e for e in t.table("all_reduce", 4, 1)
               if (e.algorithm, e.protocol) == ("ring", "Simple")]
    assert ring.bandwidth_gbs == pytest.approx(2 * 24 * 4 / 6)  # rings keep all of it


def test_nvls_tree_correction_on_blackwell_only() -> None:
    """ncclTopoGetAlgoTime scales NVLS-tree all_reduce by the tree correction (Simple row,
    64 B x 2^k, k < 24) on compute capability 10.0+ with an x86 CPU: 64 MiB (k = 20) x 0.8,
    512 MiB (k = 23) x 0.9, 1 GiB (k = 24) as it is; Hopper's NVLS-tree never."""
    f = load_topology("gb200-nvl72-multirack", {"nodes": 2}).fabric()
    t = NcclTuner(f, "GB200", 0.96)
    (e,) = [e for e in t.table("all_reduce", 144, 72) if e.algorithm == "nvls_tree"]
    for k, factor in ((20, 0.8), (23, 0.9), (24, 1.0)):
        size = 64.0 * 2**k
        got = t.seconds(e, "all_reduce", np.array([size]), 144, 72)[0] * 1e6
        assert got == pytest.approx(e.latency_us + size / (1000 * e.bandwidth_gbs * factor))
    h = bare("h100-sxm", "h100-ib-ndr", 2).tuner
    (e,) = [e for e in h.table("all_reduce", 16, 8) if e.algorithm == "nvls_tree"]
    size = 64.0 * 2**20
    got = h.seconds(e, "all_reduce", np.array([size]), 16, 8)[0] * 1e6
    assert got == pytest.approx(e.latency_us + size / (1000 * e.bandwidth_gbs))
