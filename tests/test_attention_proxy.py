"""Attention FLOPs proxies: known answers by hand, and brute-force checks on small inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from libra_des.errors import InputError
from libra_des.plan.attention import (
    block_doc_len,
    block_pairs,
    block_pairs_window,
    causal_pairs,
    doc_len,
    segments,
    sum_sq,
    sum_sq_segments,
)

lengths_st = st.lists(st.integers(1, 40), min_size=1, max_size=12)


def brute_block_pairs(lengths: list[int], block: int, window: int | None) -> list[int]:
    """Walk every query token of the packed sequence and add its key count to its block."""
    out: dict[int, int] = {}
    pos = 0
    for length in lengths:
        for q in range(length):
            keys = q + 1 if window is None else min(q + 1, window)
            out[pos // block] = out.get(pos // block, 0) + keys
            pos += 1
    return [out[b] for b in sorted(out)]


def test_block_pairs_known_answer() -> None:
    # Samples [3, 5, 2], B = 4. Block 0 = sample 0 (1+2+3) + sample 1's query 0 (1) = 7;
    # block 1 = sample 1's queries 1..4 (2+3+4+5) = 14; block 2 = sample 2 (1+2) = 3.
    starts, ends, pairs = block_pairs(np.array([3, 5, 2]), 4)
    assert starts.tolist() == [0, 4, 8]
    assert ends.tolist() == [4, 8, 10]
    assert pairs.tolist() == [7, 14, 3]


def test_window_known_answer() -> None:
    # One sample of 6 tokens, window 2: keys per query 1,2,2,2 | 2,2.
    _, _, pairs = block_pairs_window(np.array([6]), 4, 2)
    assert pairs.tolist() == [7, 4]


def test_scalar_proxies() -> None:
    assert causal_pairs([3, 5, 2]) == 6 + 15 + 3
    assert sum_sq([3, 5, 2]) == 9 + 25 + 4
    got = sum_sq_segments(np.array([3, 5, 2, 7]), np.array([0, 2, 4]))
    assert got.tolist() == [34.0, 53.0]
    # Pair-weighted: (6*3 + 15*5 + 3*2) / 24.
    assert doc_len([3, 5, 2]) == pytest.approx((18 + 75 + 6) / 24)


@settings(max_examples=60, deadline=None)
@given(lengths_st, st.integers(1, 30))
def test_block_pairs_match_brute_force(lengths: list[int], block: int) -> None:
    starts, ends, pairs = block_pairs(np.array(lengths), block)
    assert pairs.tolist() == brute_block_pairs(lengths, block, None)
    assert int(pairs.sum()) == causal_pairs(lengths)
    # Blocks tile [0, T) exactly, each at most B tokens.
    assert starts[0] == 0 and ends[-1] == sum(lengths)
    assert (starts[1:] == ends[:-1]).all() and ((ends - starts) <= block).all()


@settings(max_examples=60, deadline=None)
@given(lengths_st, st.integers(1, 30), st.integers(1, 50))
def test_window_pairs_match_brute_force(lengths: list[int], block: int, window: int) -> None:
    _, _, pairs = block_pairs_window(np.array(lengths), block, window)
    assert pairs.tolist() == brute_block_pairs(lengths, block, window)
    _, _, full = block_pairs(np.array(lengths), block)
    assert (pairs <= full).all()
    if window >= max(lengths):
        assert pairs.tolist() == full.tolist()


@settings(max_examples=40, deadline=None)
@given(lengths_st, st.integers(1, 30))
def test_block_doc_len_is_pair_weighted_mean(lengths: list[int], block: int) -> None:
    arr = np.array(lengths)
    seg = segments(arr, block)
    got = block_doc_len(seg, arr)
    for b in range(seg.blocks):
        mine = seg.block == b
        w = seg.pairs[mine].astype(float)
        assert got[b] == pytest.approx(float(np.dot(w, arr[seg.sample[mine]]) / w.sum()))
        assert arr[seg.sample[mine]].min() <= got[b] + 1e-9
        assert got[b] <= arr[seg.sample[mine]].max() + 1e-9


def test_large_lengths_stay_exact() -> None:
    # 1M-token samples: pair counts ~5e11 must not overflow or round.
    lens = np.array([1_048_576, 3, 1_000_000])
    _, _, pairs = block_pairs(lens, 16_384)
    assert int(pairs.sum()) == sum(n * (n + 1) // 2 for n in lens.tolist())


@pytest.mark.parametrize(
    ("lengths", "block", "field"),
    [([3, 0, 2], 4, "lengths"), ([3, 2], 0, "block_size"), ([2.5], 4, "lengths")],
)
def test_bad_input_is_input_error(lengths: list[float], block: int, field: str) -> None:
    with pytest.raises(InputError) as err:
        block_pairs(np.array(lengths), block)
    assert err.value.field == field


def test_bad_window_is_input_error() -> None:
    with pytest.raises(InputError, match="window"):
        block_pairs_window(np.array([4]), 2, 0)
