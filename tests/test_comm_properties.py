"""Physical properties of communication costs on every shipped topology (hypothesis)."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from libra_des.errors import InputError
from libra_des.hardware.costs import CostModel
from libra_des.hardware.fabric.topology import load_topology, shipped_topologies
from libra_des.hardware.profiles.profile import datasheet_for, load_profile

TOPOLOGIES = [t for t in shipped_topologies() if load_topology(t).spec.network]
OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")


@cache
def model(topology: str) -> CostModel:
    """The topology grown to 8 nodes, priced with its GPU's shipped profile."""
    topo = load_topology(topology, {"nodes": 8})
    try:
        profile = datasheet_for(topo.spec.gpu)
    except InputError:  # no shipped profile for this GPU: scenarios fall back to the default
        profile = load_profile(None)
    return CostModel(profile, topo.fabric())


def node_bytes(op: str, size: float, n: int, g: int) -> float:
    """The fewest bytes one node must send or receive across its boundary (N nodes)."""
    nodes = n // g
    part = (nodes - 1) / nodes
    return {
        "all_reduce": 2 * part * size,
        "all_gather": part * size,
        "reduce_scatter": part * size,
        "broadcast": size,
        "all_to_all": g * (n - g) / n * size,
    }[op]


def test_every_shipped_topology_with_nics_is_covered() -> None:
    assert len(TOPOLOGIES) >= 5


@settings(max_examples=80, deadline=None)
@given(
    topology=st.sampled_from(TOPOLOGIES),
    op=st.sampled_from(OPS),
    size=st.floats(1e3, 1e10),
    nodes=st.sampled_from([2, 4, 8]),
    g=st.sampled_from([1, 2, 4, 8]),
)
def test_no_nic_carries_more_than_its_line_rate(
    topology: str, op: str, size: float, nodes: int, g: int
) -> None:
    cost = model(topology)
    f = cost.fabric
    g = min(g, f.gpus_per_node)
    secs = cost.collective(op, size, nodes * g, g).seconds
    nics = min(g, f.nics_per_node)
    per_nic = node_bytes(op, size, nodes * g, g) / nics / secs
    assert per_nic <= f.nic_line_bw * (1 + 1e-9)


@settings(max_examples=60, deadline=None)
@given(
    topology=st.sampled_from(TOPOLOGIES),
    seed=st.integers(0, 2**16),
    extra=st.floats(1.0, 1e9),
    nodes=st.sampled_from([2, 3, 4]),
)
def test_all_to_allv_never_gets_faster_when_a_receiver_gets_more(
    topology: str, seed: int, extra: float, nodes: int
) -> None:
    cost = model(topology)
    g = cost.fabric.gpus_per_node
    n = nodes * g
    rng = np.random.default_rng(seed)
    send = rng.exponential(1e6, size=(n, n)) * (rng.random((n, n)) < 0.7)
    dst, src = int(rng.integers(n)), int(rng.integers(n))
    more = send.copy()
    more[src, dst] += extra
    assert cost.all_to_allv(more, g) >= cost.all_to_allv(send, g)


@pytest.mark.parametrize("topology", TOPOLOGIES)
@pytest.mark.parametrize("op", OPS)
def test_monotone_in_bytes_and_in_group_across_the_node_boundary(topology: str, op: str) -> None:
    cost = model(topology)
    g = cost.fabric.gpus_per_node
    sizes = np.geomspace(1e3, 1e10, 15)
    rows = [[cost.collective(op, s, n, g).seconds for s in sizes] for n in (g, 2 * g, 4 * g)]
    times = np.array(rows)
    assert np.all(np.diff(times, axis=1) >= -1e-15)  # more bytes never faster
    # Leaving the node, then spanning more nodes, never makes the same buffer faster.
    assert np.all(np.diff(times, axis=0) >= -1e-15)


@pytest.mark.parametrize("topology", ["h200-roce-railopt", "h200-roce-railopt-2to1"])
def test_hot_receiver_sets_the_time_and_the_spine_halves_the_rate(topology: str) -> None:
    cost = model(topology)
    g = cost.fabric.gpus_per_node
    n = 4 * g
    even = np.full((n, n), 64e6)  # large messages: bandwidth-bound
    hot = even.copy()
    hot[:, 0] *= 4  # every sender sends four times as much to rank 0
    assert cost.all_to_allv(hot, g) > 1.5 * cost.all_to_allv(even, g)
    if cost.fabric.oversubscription > 1:
        from libra_des.hardware.collectives.alltoall import Mechanisms

        flat = model("h200-roce-railopt")
        # PXN moves cross-rail messages to the destination's rail inside the node, so inside
        # one leaf group nothing crosses the oversubscribed spine; without it 7 of 8 do.
        assert cost.all_to_allv(even, g) == pytest.approx(flat.all_to_allv(even, g))
        cost.a2a_on = Mechanisms(pxn=False)
        assert cost.all_to_allv(even, g) > 1.8 * flat.all_to_allv(even, g)


@pytest.mark.parametrize("topology", ["h200-roce-railopt", "h200-roce-railopt-2to1"])
def test_linear_fast_path_equals_message_by_message(topology: str) -> None:
    """The closed form for a one-regime curve against the per-message form (the same curve
    written as two equal regimes, which the fast path does not take)."""
    import dataclasses

    from libra_des.hardware.collectives.curves import Curve

    cost = model(topology)
    a2a, _ = cost.inter_a2a(32, 8)
    assert a2a.is_linear
    piece = a2a.curve.pieces[0]
    split = Curve((piece, piece.model_copy(update={"start": 1e6})), a2a.curve.origin)
    slow_model = dataclasses.replace(a2a, curve=split)
    assert not slow_model.is_linear
    rng = np.random.default_rng(3)
    inter = rng.exponential(1e6, (4, 32, 32)) * (rng.random((4, 32, 32)) < 0.6)
    node = np.arange(32) // 8
    inter[:, node[:, None] == node[None, :]] = 0.0
    np.testing.assert_allclose(a2a.stack(inter, 8), slow_model.stack(inter, 8), rtol=1e-12)
