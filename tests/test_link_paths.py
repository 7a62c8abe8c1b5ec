"""The link-to-paths index against a scan of every route (the form it replaced)."""

from __future__ import annotations

import numpy as np

from libra_des.sim.network.flow.link_paths import LinkPaths


def scan(routes: np.ndarray, paths: int, links: np.ndarray) -> np.ndarray:
    """The paths among the first ``paths`` rows of ``routes`` crossing one of ``links``."""
    rows = routes[:paths]
    hit = np.isin(rows, links) & (rows >= 0)
    return np.flatnonzero(hit.any(axis=1))


def random_routes(rng: np.random.Generator, paths: int, links: int, width: int) -> np.ndarray:
    routes = np.full((paths, width), -1, dtype=np.int64)
    for p in range(paths):
        hops = rng.choice(links, size=int(rng.integers(1, width + 1)), replace=False)
        routes[p, : hops.size] = hops
    return routes


def test_crossing_matches_a_scan_as_paths_arrive_in_batches() -> None:
    rng = np.random.default_rng(7)
    links, width = 300, 6
    routes = random_routes(rng, 2_000, links, width)
    index = LinkPaths()
    known = 0
    while known < routes.shape[0]:
        arriving = min(routes.shape[0], known + int(rng.integers(1, 400)))
        # Links are numbered as routes arrive: the index only hears of those seen so far.
        seen = int(routes[:arriving].max()) + 1
        index.enter(routes, arriving, seen)
        for _ in range(5):
            flipped = rng.choice(seen, size=int(rng.integers(1, 12)), replace=False)
            got = index.crossing(flipped, known)
            assert np.array_equal(got, scan(routes, known, flipped))
        known = arriving
    everything = index.crossing(np.arange(links), routes.shape[0])
    assert np.array_equal(everything, np.arange(routes.shape[0]))


def test_a_link_no_path_crosses_gives_nothing() -> None:
    index = LinkPaths()
    routes = np.array([[0, 1, -1], [1, 2, -1]], dtype=np.int64)
    index.enter(routes, 2, 3)
    assert index.crossing(np.array([5]), 2).size == 0  # numbered after the last route
    assert np.array_equal(index.crossing(np.array([0, 2]), 2), [0, 1])
    assert np.array_equal(index.crossing(np.array([1]), 1), [0])  # below: path 1 not known
