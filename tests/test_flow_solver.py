"""The component-wise max-min solver against the reference solver (progressive filling)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_network import network_finish_times, node_spec, reference_finish_times

from libra_des.hardware.topology import load_topology
from libra_des.sim.flow_solver import ComponentMaxMin, max_min_rates, python_max_min

MB = 1 << 20


def reference(routes: dict[int, tuple[int, ...]], caps: np.ndarray) -> dict[int, float]:
    """Rates of ``routes`` from scratch by :func:`max_min_rates`."""
    ids = sorted(routes)
    flow = np.repeat(np.arange(len(ids)), [len(routes[f]) for f in ids])
    link = np.array([m for f in ids for m in routes[f]], dtype=np.int64)
    return dict(zip(ids, max_min_rates(flow, link, len(ids), caps).tolist(), strict=True))


def assert_close(got: dict[int, float], want: dict[int, float]) -> None:
    assert got.keys() == want.keys()
    for f, rate in want.items():
        assert abs(got[f] - rate) <= 1e-9 * rate, (f, got[f], rate)


@st.composite
def flow_changes(draw: st.DrawFn) -> tuple[np.ndarray, list[tuple[int, ...]], list[list[int]]]:
    """Capacities, routes, and rounds of departures (flow ids) to apply one after another."""
    n_links = draw(st.integers(1, 10))
    caps = np.array(draw(st.lists(st.integers(1, 20), min_size=n_links, max_size=n_links)))
    route = st.sets(st.integers(0, n_links - 1), min_size=1, max_size=4).map(sorted)
    routes = [tuple(r) for r in draw(st.lists(route, min_size=1, max_size=16))]
    order = draw(st.permutations(range(len(routes))))
    cuts = sorted(draw(st.lists(st.integers(0, len(routes)), max_size=4)))
    rounds = [list(order[a:b]) for a, b in zip([0, *cuts], [*cuts, len(routes)], strict=True)]
    return caps.astype(float), routes, [r for r in rounds if r]


@settings(max_examples=150, deadline=None)
@given(flow_changes())
def test_component_solver_equals_progressive_filling_after_arrivals_and_departures(
    case: tuple[np.ndarray, list[tuple[int, ...]], list[list[int]]],
) -> None:
    """Every flow arrives, then groups leave; after each change the re-solved component
    (only flows at least as fast as the slowest leaver) gives the from-scratch rates."""
    caps, routes, rounds = case
    solver = ComponentMaxMin()
    solver.capacity = caps
    for f, route in enumerate(routes):
        solver.add(f, route)
    solver.solve({m for r in routes for m in r}, 0.0)
    assert_close(solver.rate, reference(solver.routes, caps))
    for gone in rounds[:-1]:
        floor = min(solver.rate[f] for f in gone)
        touched = {m for f in gone for m in solver.routes[f]}
        for f in gone:
            solver.remove(f)
        solver.solve(touched, floor)
        assert_close(solver.rate, reference(solver.routes, caps))


def test_python_fill_gives_the_closed_forms() -> None:
    # Two flows on one 10-wide link get 5 each; a third crossing it and a 2-wide link gets 2
    # there, leaving 4 each to the first two on the 10-wide one.
    assert python_max_min([(0,), (0,)], {0: 10.0}) == [5.0, 5.0]
    assert python_max_min([(0,), (0,), (0, 1)], {0: 10.0, 1: 2.0}) == [4.0, 4.0, 2.0]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 7), st.integers(1, 7),
                          st.integers(1, 64)), min_size=1, max_size=30))
def test_network_finish_times_equal_a_fluid_simulation_with_the_reference_solver(
    raw: list[tuple[int, int, int, int]],
) -> None:
    """Random transfers (start in 10 us steps, GPU pairs, MB) on two 4-GPU nodes: each flow's
    finish time within 1e-9 relative of recomputing every rate from scratch at every event."""
    topo = load_topology(node_spec("1us"))
    starts = [(t * 1e-5, src, (src + hop) % 8, size * MB) for t, src, hop, size in raw]
    got, _ = network_finish_times(topo, starts)
    want = reference_finish_times(topo, starts)
    assert np.allclose(got, want, rtol=1e-9, atol=0)
