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

import pytest

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
