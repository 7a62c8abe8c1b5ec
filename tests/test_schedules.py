"""Pipeline schedules against the textbook bubble closed forms."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from libra_des.errors import InputError
from libra_des.sim.training.pipeline import EventPipelineSim, PipelineSim
from libra_des.sim.training.schedules import build_schedule


def no_sync(d: int, start: np.ndarray, fin: np.ndarray) -> tuple[list[tuple[float, float]], float]:
    return [], float(np.nanmax(fin))


def bubble(name: str, p: int, m: int, v: int = 1, tf: float = 1.0, tb: float = 2.0) -> float:
    """Run the schedule with equal op times and free communication; return the bubble."""
    sched = build_schedule(name, p, m, v)
    durs = [
        np.array([[(tf if op.kind == "F" else tb) / v for op in order]])
        for order in sched.orders
    ]
    run = PipelineSim(sched, durs, 0.0, 0.0, no_sync).run()
    span = float(np.nanmax(run.finish))
    busy = sum(float(d.sum()) for d in durs)
    return (p * span - busy) / (p * span)


@settings(max_examples=30, deadline=None)
@given(p=st.integers(1, 8), m=st.integers(1, 12), name=st.sampled_from(["gpipe", "1f1b"]))
def test_gpipe_and_1f1b_bubble_closed_form(p: int, m: int, name: str) -> None:
    assert bubble(name, p, m) == pytest.approx((p - 1) / (m + p - 1), rel=1e-6, abs=1e-12)


@settings(max_examples=20, deadline=None)
@given(p=st.integers(2, 6), k=st.integers(1, 3), v=st.integers(2, 4))
def test_interleaved_bubble_closed_form(p: int, k: int, v: int) -> None:
    m = k * p
    assert bubble("interleaved", p, m, v, 1.0, 1.0) == pytest.approx(
        (p - 1) / (v * m + p - 1), rel=1e-6
    )


def test_every_op_runs_once_and_dependencies_hold() -> None:
    sched = build_schedule("1f1b", 4, 6)
    durs = [np.ones((2, len(o))) for o in sched.orders]
    run = PipelineSim(sched, durs, 0.5, 10.0, no_sync).run()
    assert len(run.counters.executed) == 2 * 4 * 6 * 2
    assert set(run.counters.executed.values()) == {1}
    assert run.counters.p2p_sent == run.counters.p2p_received > 0
    for d, order in enumerate(sched.orders):
        for i, op in enumerate(order):
            dep = sched.dependency(d, op)
            if dep is None:
                continue
            j = sched.orders[dep[0]].index(dep[1])
            lag = 0.5 if dep[0] != d else 0.0
            assert np.all(run.start[:, d, i] >= run.finish[:, dep[0], j] + lag - 1e-12)


def test_interleaved_needs_multiple_of_p() -> None:
    with pytest.raises(InputError, match="pp=4"):
        build_schedule("interleaved", 4, 6, 2)


def recorded_sync(calls: list[int]):  # type: ignore[no-untyped-def]
    """A sync that records its call order and ends after the device's last finish."""

    def sync(d: int, start: np.ndarray, fin: np.ndarray) -> tuple[list[tuple[float, float]], float]:
        calls.append(d)
        end = float(np.nanmax(fin)) + 0.25 * (d + 1)
        return [(float(np.nanmin(start)), end)], end

    return sync


@settings(max_examples=40, deadline=None)
@given(p=st.integers(1, 5), k=st.integers(1, 3), v=st.integers(1, 3), e=st.integers(1, 4),
       name=st.sampled_from(["gpipe", "1f1b", "interleaved"]), seed=st.integers(0, 2**31))
def test_recurrence_equals_the_event_walk(p: int, k: int, v: int, e: int, name: str,
                                          seed: int) -> None:
    # The fast path's recurrence must give SimPy's floats, not just close ones: random
    # durations and per-boundary hand-off times, noise-like, so no two ops tie by accident.
    v = v if name == "interleaved" else 1
    sched = build_schedule(name, p, k * p, v)
    rng = np.random.default_rng(seed)
    durs = [rng.lognormal(-3.0, 0.7, (e, len(o))) for o in sched.orders]
    p2p = rng.uniform(0.0, 0.02, (p, p))
    calls: tuple[list[int], list[int]] = ([], [])
    fast = PipelineSim(sched, durs, p2p, 8.0, recorded_sync(calls[0])).run()
    slow = EventPipelineSim(sched, durs, p2p, 8.0, recorded_sync(calls[1])).run()
    for field in ("start", "finish", "ran", "sync_end", "sync_exposed", "sync_hidden"):
        assert np.array_equal(getattr(fast, field), getattr(slow, field), equal_nan=True), field
    assert fast.buckets == slow.buckets
    assert calls[0] == calls[1]
    assert fast.counters.executed == slow.counters.executed
    assert fast.counters.p2p_sent == slow.counters.p2p_sent
    assert fast.counters.p2p_received == slow.counters.p2p_received
    assert fast.events == e * sum(len(o) for o in sched.orders) + p


@settings(max_examples=30, deadline=None)
@given(p=st.integers(1, 5), k=st.integers(1, 3), e=st.integers(1, 3),
       name=st.sampled_from(["gpipe", "1f1b"]), lag=st.sampled_from([0.0, 1.0, 0.5]),
       seed=st.integers(0, 2**31))
def test_recurrence_equals_the_event_walk_with_ties(p: int, k: int, e: int, name: str,
                                                    lag: float, seed: int) -> None:
    # Whole-number durations make ops finish together; the timeline must still match (the
    # order in which tied devices synchronise may differ: see PipelineSim.synchronise).
    sched = build_schedule(name, p, k * p)
    rng = np.random.default_rng(seed)
    durs = [rng.integers(0, 3, (e, len(o))).astype(float) for o in sched.orders]
    fast = PipelineSim(sched, durs, lag, 8.0, recorded_sync([])).run()
    slow = EventPipelineSim(sched, durs, lag, 8.0, recorded_sync([])).run()
    for field in ("start", "finish", "ran", "sync_end", "sync_exposed", "sync_hidden"):
        assert np.array_equal(getattr(fast, field), getattr(slow, field), equal_nan=True), field


@pytest.mark.filterwarnings("ignore:All-NaN slice")
def test_an_op_whose_input_never_comes_stays_unrun() -> None:
    sched = build_schedule("1f1b", 2, 2)
    deps = PipelineSim(sched, [np.ones((1, 4))] * 2, 0.0, 0.0, no_sync)
    stuck = deps.deps[1][0]
    assert stuck is not None
    deps.deps[1][0] = (1, 3)  # waits for its own device's last op: a cycle
    run = deps.run()
    assert run.ran[0, 1].sum() == 0 and np.isnan(run.finish[0, 1]).all()
    assert run.ran[0, 0].sum() < 4  # device 0's backwards wait for device 1
