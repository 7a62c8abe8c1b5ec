"""Fast paths added for scale against the plain forms they replace, bit for bit: all-to-alls
priced as a stack, sparse exchange matrices, the compiled Pipeliner makespan, and the
peeked first window."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from test_comm_properties import TOPOLOGIES, model

from libra_des.config import LengthDist
from libra_des.hardware.collectives.a2a_batch import all_to_allv_batch
from libra_des.plan.pipeline_kernel import pipelined_rows
from libra_des.plan.tap import pipelined_array
from libra_des.plan.types import PairBytes
from libra_des.workload.packing import CorpusStream


def matrices(rng: np.random.Generator, count: int, n: int) -> list[np.ndarray]:
    out = list(rng.random((count, n, n)) * 1e8 * (rng.random((count, n, n)) < 0.15))
    out[0] = np.zeros((n, n))
    out[1] = np.diag(np.ones(n))  # only self-traffic: costs nothing
    return out


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_stacked_all_to_alls_equal_one_by_one(topology: str) -> None:
    cost = model(topology)
    rng = np.random.default_rng(3)
    gpn = int(cost.fabric.gpus_per_node)
    for n in sorted({2, gpn, 2 * gpn, 4 * gpn}):
        sends = matrices(rng, 300, n)  # more than one block of 256
        before = dict(cost.ledger)
        cost.ledger.clear()
        ref = [cost.all_to_allv(s, gpus_per_node=gpn) for s in sends]
        noted = dict(cost.ledger)
        cost.ledger.clear()
        got = all_to_allv_batch(cost, iter(sends), gpus_per_node=gpn)
        assert cost.ledger == noted
        cost.ledger.clear()
        cost.ledger.update(before)
        assert np.array_equal(got, np.array(ref)), (topology, n)
        assert got[1] == 0.0 and (got[2:] > 0).any()


def test_pair_bytes_round_trip() -> None:
    rng = np.random.default_rng(4)
    for m in matrices(rng, 5, 16):
        packed = PairBytes.of(m)
        assert packed.values.size == np.count_nonzero(m)
        assert np.array_equal(packed.dense(), m) and packed.dense().dtype == np.float64
        whole = np.round(m * 1e6)  # byte counts: whole numbers, summed exactly in any order
        assert np.array_equal(PairBytes.of(whole).sent(), whole.sum(axis=1))
        assert np.array_equal(PairBytes.of(whole).received(), whole.sum(axis=0))
        assert np.allclose(packed.received(), m.sum(axis=0), rtol=1e-12, atol=0)
    with pytest.raises(ValueError):
        PairBytes.of(np.zeros((2, 3)))


def reference_makespan(c: np.ndarray, d: np.ndarray, r: np.ndarray, m: int) -> np.ndarray:
    """The Pipeliner recurrence as whole-array numpy operations (the original form)."""
    channel, ready, compute_end = d, d, 0.0 * c
    for k in range(m):
        start = np.maximum(ready, compute_end)
        if k + 1 < m:
            channel = np.maximum(start, channel) + d
            ready = channel
        if k >= 1:
            channel = np.maximum(start, channel) + r
        compute_end = start + c
    return np.maximum(compute_end, channel) + r


@pytest.mark.parametrize("m", [1, 2, 3, 4, 8])
def test_makespan_kernel_equals_numpy(m: int) -> None:
    rng = np.random.default_rng(m)
    c = rng.random((3, 5, 2, 7))
    d, r = rng.random((3, 5, 1, 1)), rng.random((3, 5, 1, 1))
    c[0, 0, 0, :3], d[1, 1], r[2, 2] = 0.0, 0.0, 0.0
    want = reference_makespan(c, d, r, m)
    assert np.array_equal(pipelined_array(c, d, r, m), want)
    assert np.array_equal(pipelined_rows(c.reshape(15, -1), d.ravel(), r.ravel(), m),
                          want.reshape(15, -1))
    # Shapes the row kernel does not take run one element a row: same values.
    half = np.full((1, 1, 1, 1), 0.5)
    assert np.array_equal(pipelined_array(c, half, r, m), reference_makespan(c, half, r, m))


def test_peeked_window_is_the_next_one() -> None:
    dist = LengthDist(median=1000, p99=4000, max=4096)
    a = CorpusStream(dist, 4096, np.random.default_rng(5))
    b = CorpusStream(dist, 4096, copy.deepcopy(np.random.default_rng(5)))
    first = a.peek_window(16)
    assert a.peek_window(16) is first
    with pytest.raises(ValueError, match="peeked a window of 16, asked for 8"):
        a.peek_window(8)  # a caller's bug, not bad input
    for _ in range(3):
        x, y = a.next_window(16), b.next_window(16)
        assert np.array_equal(x.lengths, y.lengths) and np.array_equal(x.offsets, y.offsets)
    assert x is not first
