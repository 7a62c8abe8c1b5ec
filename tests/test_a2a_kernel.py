"""The all-to-all stack's one-pass sums (``a2a_kernel.pair_sums``) against the masked numpy
sums they replace, and the closed form they feed against pricing message by message."""

from __future__ import annotations

import numpy as np
import pytest

from libra_des.hardware.collectives.a2a_kernel import pair_sums
from libra_des.hardware.costs import CostModel
from libra_des.hardware.fabric.topology import load_topology
from libra_des.hardware.profiles.profile import load_profile


def nested_depth(rng: np.random.Generator, n: int, classes: int) -> np.ndarray:
    """[n, n] depths of nested classes (a pair in class k is in every class before), -1 on
    a random share of pairs (left out)."""
    depth = rng.integers(0, classes, size=(n, n))
    return np.where(rng.random((n, n)) < 0.2, -1, depth)


@pytest.mark.parametrize("classes", [1, 3])
def test_pair_sums_are_the_masked_sums(classes: int) -> None:
    rng = np.random.default_rng(7)
    s, n, rails = 5, 24, 3
    send = rng.random((s, n, n)) * 4e4 * (rng.random((s, n, n)) < 0.4)
    depth = nested_depth(rng, n, classes)
    rail = rng.integers(0, rails, size=n)
    threshold, share = 16384.0, 0.5
    rows, cols, sent, got, by_rail = pair_sums(send, depth, classes, threshold, share, rail,
                                               rails)
    wire = np.where(send <= threshold, send / share, send)
    for k in range(classes):
        here = (depth >= k)[None] & (send > 0)
        w = np.where(here, wire, 0.0)
        np.testing.assert_allclose(rows[k], w.sum(2), rtol=1e-12)
        np.testing.assert_allclose(cols[k], w.sum(1), rtol=1e-12)
        np.testing.assert_array_equal(sent[k], here.sum(2))
        np.testing.assert_array_equal(got[k], here.sum(1))
    priced = np.where((depth >= 0)[None], send, 0.0)
    for r in range(rails):
        np.testing.assert_allclose(by_rail[:, :, r], priced[:, :, rail == r].sum(2), rtol=1e-12)


def test_pair_sums_without_rails_or_small_messages_keep_bytes() -> None:
    send = np.array([[[0.0, 10.0], [3.0, 0.0]]])
    depth = np.array([[-1, 0], [0, -1]])
    rows, cols, sent, _, by_rail = pair_sums(send, depth, 1, -1.0, 1.0,
                                             np.zeros(0, dtype=np.int64), 0)
    assert rows[0, 0].tolist() == [10.0, 3.0] and cols[0, 0].tolist() == [3.0, 10.0]
    assert sent[0, 0].tolist() == [1.0, 1.0] and by_rail.shape == (1, 2, 0)


@pytest.mark.parametrize("topology", ["h200-roce-railopt-2to1", "h100-ib-3tier"])
def test_closed_form_terms_equal_the_message_by_message_terms(topology: str) -> None:
    """On a one-regime curve the per-class closed form (sums) and timing every message on its
    own give the same per-rank seconds: the two branches of ``InterNodeA2A.stack`` agree."""
    fabric = load_topology(topology, {"nodes": 16}).fabric()
    model = CostModel(load_profile("h200-sxm"), fabric)
    g = fabric.gpus_per_node
    n = 8 * g
    inter, _ = model.inter_a2a(n, g)
    assert inter.is_linear
    rng = np.random.default_rng(3)
    send = rng.random((4, n, n)) * 1e5 * (rng.random((4, n, n)) < 0.3)
    classes = inter.classes(n)
    depth = inter.depth(n, g, classes)
    rail = inter.rail_groups(n)
    assert inter.protocol is not None
    sums = pair_sums(send, depth, len(classes), float(inter.protocol.threshold),
                     inter.protocol.small_share, rail, int(rail.max()) + 1)
    for k, (_, scale) in enumerate(classes):
        closed = inter.class_terms(sums, k, scale, n, g)
        by_message = inter.message_terms(np.where(depth >= k, send, 0.0), scale, n, g)
        for a, b in zip(closed, by_message, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-9)
    # PXN's hop from the per-rail sums: each sender's bytes to the other rails of its node's
    # mates, as the cross-node matrix itself gives them.
    node = np.arange(n) // g
    cross = np.where(node[:, None] != node[None, :], send, 0.0)
    rails = inter.leaves.rails(n)
    off_rail = np.where(rails[:, None] != rails[None, :], cross, 0.0)
    nics = int(rails.max()) + 1
    forwarded = np.zeros((4, n // g, nics))
    for r in range(nics):
        forwarded[:, :, r] = off_rail[:, :, rails == r].sum(2).reshape(4, n // g, g).sum(2)
    per_rail = np.bincount(rails[:g], minlength=nics)
    proxy_in = (forwarded / per_rail).max(axis=(1, 2))
    expected = np.maximum(off_rail.sum(2), proxy_in[:, None]) / inter.hop_bw
    assert inter.pxn
    np.testing.assert_allclose(inter.pxn_hop(sums[4]), expected, rtol=1e-12)
