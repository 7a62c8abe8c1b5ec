"""Pipeline schedules against the textbook bubble closed forms."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from libra_des.errors import InputError
from libra_des.sim.training.pipeline import PipelineSim
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
