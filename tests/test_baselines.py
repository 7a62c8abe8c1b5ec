"""Baselines: Ulysses volumes by closed form, DistCA as one big pool, WLB-LLM packing."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from libra_des.config import ModelSpec
from libra_des.errors import InputError
from libra_des.plan.attention import causal_pairs
from libra_des.plan.baselines import (
    distca_plan,
    ulysses_plan,
    wlb_cost_coefficients,
    wlb_llm_pack,
)
from libra_des.workload.packing import cut_pieces, pack


def model(heads_q: int = 32, heads_kv: int = 4) -> ModelSpec:
    return ModelSpec(name="m", layers=2, hidden=2048, heads_q=heads_q, heads_kv=heads_kv,
                     head_dim=128, ffn=6144)


@pytest.mark.parametrize(("cp", "heads_kv"), [(2, 4), (4, 4), (8, 4), (8, 16)])
def test_ulysses_volumes(cp: int, heads_kv: int) -> None:
    seq = np.array([1000, 3000, 4192])  # 8,192 tokens
    m = model(heads_kv=heads_kv)
    plan = ulysses_plan(seq, cp=cp, model=m)
    width = 128 * 2
    local_q = 8192 / cp * 32 * width
    # Each rank sends (cp-1)/cp of its Q; of K/V it sends every peer the KV heads that peer
    # needs: heads_kv/cp of them, or one replicated head when heads_kv < cp.
    kv_per_peer = 8192 / cp * 2 * max(heads_kv // cp, 1) * width
    expect_dispatch = (cp - 1) / cp * local_q + (cp - 1) * kv_per_peer
    assert plan.dispatch_bytes.sum(axis=1) == pytest.approx(np.full(cp, expect_dispatch))
    assert plan.return_bytes.sum(axis=1) == pytest.approx(np.full(cp, (cp - 1) / cp * local_q))
    if heads_kv >= cp:  # no replication: exactly (cp-1)/cp of the local K/V leaves
        local_kv = 8192 / cp * 2 * heads_kv * width
        assert (cp - 1) * kv_per_peer == pytest.approx((cp - 1) / cp * local_kv)
    assert np.trace(plan.dispatch_bytes) == 0
    assert plan.imbalance == 0.0
    assert plan.total_pairs == causal_pairs(seq) * 32
    assert plan.worker_heads.tolist() == [32 // cp] * cp


def test_ulysses_needs_cp_dividing_heads() -> None:
    with pytest.raises(InputError, match="cp"):
        ulysses_plan(np.array([10]), cp=3, model=model())


def test_distca_is_one_pool_over_all_replicas() -> None:
    seqs = [np.array([4096, 4096]), np.array([8000, 192]), np.array([100] * 80 + [192])]
    got = distca_plan(seqs, cp=2, model=model(), heads_split=2, block_size=1024,
                      packed_length=8192, chunks=4)
    assert got.attention.policy == "distca_tiles"
    assert got.attention.workers == 6 and got.attention.chunks == 4
    assert got.attention.total_pairs == sum(causal_pairs(s) for s in seqs) * 32


def test_wlb_known_answer() -> None:
    # L = 8, d = 2, cost = Σl². Longest first: 5 -> mb0 (25); 4 -> mb1 (16); 3 -> mb1
    # (cheaper, room 4) = 25; 3 -> mb0 (only one with room 3) = 34; 1 -> mb1 (room 1) = 26.
    got = wlb_llm_pack(np.array([5, 4, 3, 3, 1]), 8, 2, defer_outliers=False)
    assert [got.batch.seq(i).tolist() for i in range(2)] == [[5, 3], [4, 3, 1]]
    assert got.batch.sample_ids.tolist() == [0, 3, 1, 2, 4]
    assert got.cost.tolist() == [34.0, 26.0]
    assert not got.changes_step_samples and got.overflow_tokens == 0


def test_wlb_linear_term_changes_the_choice() -> None:
    # a=0, b=1: cost is tokens; [4, 3, 3]: 4 -> mb0, 3 -> mb1, 3 -> mb1 (3 < 4) = 6.
    got = wlb_llm_pack(np.array([4, 3, 3]), 8, 2, coefficients=(0.0, 1.0))
    assert got.cost.tolist() == [4.0, 6.0]


lengths_st = st.lists(st.integers(1, 40), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(lengths_st, st.integers(4, 32), st.integers(1, 6))
def test_wlb_without_deferral_keeps_the_step(lengths: list[int], cap: int, d: int) -> None:
    got = wlb_llm_pack(np.array(lengths), cap, d, defer_outliers=False)
    pieces, _ = cut_pieces(np.array(lengths), cap)
    assert len(got.batch) == d
    assert Counter(got.batch.lengths.tolist()) == Counter(pieces.tolist())
    assert not got.changes_step_samples and got.deferred.size == 0
    tokens = np.array([got.batch.seq(i).sum() for i in range(d)])
    assert got.overflow_tokens == int(np.maximum(tokens - cap, 0).sum())
    if sum(lengths) <= cap:  # everything fits one microbatch: nothing can overflow
        assert got.overflow_tokens == 0


@settings(max_examples=60, deadline=None)
@given(lengths_st, st.integers(4, 32), st.integers(1, 6))
def test_wlb_with_deferral(lengths: list[int], cap: int, d: int) -> None:
    got = wlb_llm_pack(np.array(lengths), cap, d, defer_outliers=True, outlier_threshold=cap // 2)
    pieces, _ = cut_pieces(np.array(lengths), cap)
    kept = got.batch.lengths.tolist()
    # Nothing lost: kept + deferred is the step's pieces, and nothing is over-filled.
    assert Counter(kept + got.deferred.tolist()) == Counter(pieces.tolist())
    assert got.overflow_tokens == 0
    assert all(got.batch.seq(i).sum() <= cap for i in range(d))
    assert got.changes_step_samples == bool(got.deferred.size)
    outliers = int((pieces > cap // 2).sum())
    if 0 < outliers < d:  # too few to spread one per microbatch: all wait
        assert (got.deferred > cap // 2).sum() == outliers
    elif outliers >= d:  # the d oldest are released, one per microbatch; the rest wait
        assert (got.deferred > cap // 2).sum() >= outliers - d
        assert all((got.batch.seq(i) > cap // 2).sum() <= 1 for i in range(d))


def test_wlb_outlier_delay_releases_the_d_oldest_hand_checked() -> None:
    """L = 100, d = 2, threshold 50: outliers 60, 70, 80 arrive; 60 and 70 (oldest) are
    released, one per microbatch, 80 waits. Greedy by decreasing length, cost l^2: 70 -> mb 0,
    60 -> mb 1, then 20 and 10 to the cheaper mb 1 (3600 < 4900, then 4000 < 4900)."""
    got = wlb_llm_pack(np.array([60, 70, 80, 10, 20]), 100, 2, defer_outliers=True)
    assert got.deferred.tolist() == [80] and got.changes_step_samples
    assert got.batch.seq(0).tolist() == [70]
    assert sorted(got.batch.seq(1).tolist()) == [10, 20, 60]
    assert got.cost.tolist() == [4900.0, 4100.0]
    # Next step: 80 is the oldest in the queue and goes first with the next outlier.
    nxt = wlb_llm_pack(np.array([90, 55, 5]), 100, 2, defer_outliers=True, queue=got.deferred)
    assert nxt.deferred.tolist() == [55]
    assert sorted(nxt.batch.lengths.tolist()) == [5, 80, 90]


def test_wlb_queue_is_released_and_marks_the_step() -> None:
    got = wlb_llm_pack(np.array([2, 2]), 10, 2, defer_outliers=True, queue=np.array([7, 6]))
    assert sorted(got.batch.lengths.tolist()) == [2, 2, 6, 7]  # two outliers >= d: released
    assert got.changes_step_samples and got.deferred.size == 0


def test_wlb_balances_better_than_arrival_packing() -> None:
    rng = np.random.default_rng(3)
    raw = np.minimum(rng.lognormal(np.log(600), 1.8, 4000).astype(np.int64) + 1, 30_000)
    arrival = pack(raw, 65_536)
    d = len(arrival)
    got = wlb_llm_pack(raw, 65_536, d)
    assert got.overflow_tokens == 0
    worst_arrival = float(arrival.sum_sq().max())
    assert got.cost.max() < 0.8 * worst_arrival


def test_wlb_cost_coefficients_match_attention_flops() -> None:
    m = model()
    a, b = wlb_cost_coefficients(m)
    length = 100_000
    attention = 4 * 128 * 32 * length * (length + 1) / 2  # 4*d FLOPs per pair-head
    assert a * length**2 == pytest.approx(attention, rel=1e-4)
    assert b > 0


def test_wlb_bad_input() -> None:
    with pytest.raises(InputError, match="packed_length"):
        wlb_llm_pack(np.array([3]), 0, 2)
    with pytest.raises(InputError, match="d"):
        wlb_llm_pack(np.array([3]), 8, 0)


def test_wlb_objective_has_no_linear_term_in_attention_only_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The idealised balancer packs an attention-only run by a*Σl² alone; a full run keeps b*Σl."""
    from libra_des.config import ROOT, load_scenario
    from libra_des.plan.balancers import wlb_llm
    from libra_des.workload.packing import pack

    seen: list[tuple[float, float]] = []
    real_pack = wlb_llm.wlb_llm_pack

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(kwargs["coefficients"])  # type: ignore[arg-type]
        return real_pack(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(wlb_llm, "wlb_llm_pack", spy)
    path = ROOT / "scenarios" / "paper-attention-microbench-256k.yaml"
    window = pack(np.array([9_000, 5_000, 3_000, 2_000, 1_000]), 16_384)
    for attention_only in (True, False):
        scenario = load_scenario(path, ["balancer.policy=wlb_llm_ideal",
                                        f"attention_only={str(attention_only).lower()}"])
        wlb_llm.repack_ideal(scenario, window, np.zeros(0, np.int64))
    (a_only, b_only), (a_full, b_full) = seen
    assert b_only == 0.0 and a_only == a_full > 0 and b_full > 0
    # Hand-checked: 9,000 and 5,000 open two microbatches (81e6, 25e6 by Σl²); 3,000, 2,000
    # and 1,000 each join the cheaper one, which stays the one holding 5,000 (34e6, 38e6).
    got = real_pack(np.array([9_000, 5_000, 3_000, 2_000, 1_000]), 16_384, 2,
                    coefficients=(1.0, 0.0))
    assert got.cost.tolist() == [81e6, 25e6 + 9e6 + 4e6 + 1e6]
