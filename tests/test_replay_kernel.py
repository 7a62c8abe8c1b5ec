"""The replays' compiled reservation bookkeeping against the numpy forms it replaced."""

from __future__ import annotations

import numpy as np

from libra_des.sim.network.flow import replay_kernel as kernel
from libra_des.sim.network.flow.tolerances import MARGIN


def test_reserve_and_release_match_fancy_indexing_and_end_at_exact_zero() -> None:
    rng = np.random.default_rng(3)
    nlinks = 50
    reserved, on = np.zeros(nlinks), np.zeros(nlinks, dtype=np.int64)
    ref_reserved, ref_on = reserved.copy(), on.copy()
    replays = []
    for _ in range(40):
        links = np.sort(rng.choice(nlinks, size=8, replace=False))
        peaks = rng.random(8) * 1e9
        kernel.reserve(links, peaks, reserved, on)
        ref_reserved[links] += peaks
        ref_on[links] += 1
        replays.append((links, peaks, np.ones(8, dtype=bool), np.ones(8, dtype=bool)))
    for links, peaks, held, ref_held in replays:
        for mask in (held & (rng.random(8) < 0.5), held):  # some, then the rest (in place)
            which = np.flatnonzero(mask)
            kernel.release(links, peaks, mask, held, reserved, on)
            gone = links[which]
            ref_held[which] = False
            ref_reserved[gone] -= peaks[which]
            ref_on[gone] -= 1
            ref_reserved[gone[ref_on[gone] == 0]] = 0.0
            assert np.array_equal(held, ref_held)
            assert np.array_equal(reserved, ref_reserved) and np.array_equal(on, ref_on)
    assert not reserved.any() and not on.any()


def link_state(rng: np.random.Generator, nlinks: int = 30, flows: int = 40
               ) -> tuple[np.ndarray, ...]:
    """Random capacities, reservations (and the replays holding them), flows per link,
    their ids and their rates."""
    cap = rng.random(nlinks) * 1e10 + 1e9
    reserved = np.where(rng.random(nlinks) < 0.5, rng.random(nlinks) * 5e9, 0.0)
    on = (reserved > 0).astype(np.int64)
    deg = rng.integers(0, 3, nlinks)
    lflow = np.zeros((nlinks, 4), dtype=np.int64)
    for link in range(nlinks):
        lflow[link, : deg[link]] = rng.integers(0, flows, deg[link])
    return cap, reserved, on, deg, lflow, rng.random(flows) * 2e9


def test_admission_check_matches_the_numpy_sum() -> None:
    rng = np.random.default_rng(4)
    nlinks = 30
    cap, reserved, on, deg, lflow, rate = link_state(rng, nlinks)
    links = np.sort(rng.choice(nlinks, size=12, replace=False))
    peaks = rng.random(12) * 5e9
    shared = kernel.shared(links, on, deg)
    assert np.array_equal(shared, np.flatnonzero((on[links] > 0) | (deg[links] > 0)))
    load = np.array([rate[lflow[link, : deg[link]]].sum() for link in links])
    fits = reserved[links] + load + peaks <= cap[links] * (1.0 - MARGIN)
    want = links[shared][~fits[shared]]
    got = kernel.unfit(shared, links, peaks, reserved, cap, rate, lflow, deg)
    assert want.size and np.array_equal(got, want)


def same(want: list[np.ndarray], got: tuple[np.ndarray, ...]) -> bool:
    return all(np.array_equal(a, b) for a, b in zip(want, got, strict=True))


def test_start_if_fit_is_the_check_then_the_start_and_a_refusal_changes_nothing() -> None:
    """The one-pass start admits exactly when no shared link is unfit; admitted, it leaves
    what reserve() and the fancy-indexed byte sum leave; refused, every array as it was.
    finish() is release() of every held link and the received bytes."""
    rng = np.random.default_rng(5)
    outcomes = set()
    for _ in range(60):
        cap, reserved, on, deg, lflow, rate = link_state(rng)
        links = rng.choice(30, size=6, replace=False)  # first-use order: not sorted
        peaks = rng.random(6) * float(rng.choice([1e8, 5e9]))
        gpus, sent = np.sort(rng.choice(16, size=5, replace=False)), rng.random(5) * 1e6
        bytes_sent = rng.random(16)
        fits = not kernel.unfit(kernel.shared(links, on, deg), links, peaks, reserved, cap,
                                rate, lflow, deg).size
        want = [a.copy() for a in (reserved, on, bytes_sent)]
        if fits:
            kernel.reserve(links, peaks, want[0], want[1])
            want[2][gpus] += sent
        held = kernel.start_if_fit(links, peaks, reserved, cap, rate, lflow, deg, on, gpus,
                                   sent, bytes_sent)
        outcomes.add(fits)
        assert held.size == (links.size if fits else 0) and held.all()
        assert same(want, (reserved, on, bytes_sent))
        if fits:
            received, into = rng.random(5), rng.random(16)
            ref_held = held.copy()
            want = [a.copy() for a in (reserved, on, into)]
            kernel.release(links, peaks, ref_held, ref_held, want[0], want[1])
            want[2][gpus] += received
            kernel.finish(links, peaks, held, reserved, on, gpus, received, into)
            assert not held.any()
            assert same(want, (reserved, on, into))
    assert outcomes == {True, False}


def test_per_gpu_sums_by_gpu_as_unique_and_bincount_do() -> None:
    rng = np.random.default_rng(6)
    for span in (1, 7, 300):
        gpus = rng.integers(40, 40 + span, 200)
        sizes = rng.random(200) * 1e6
        ids, where = np.unique(gpus, return_inverse=True)
        got_ids, got = kernel.per_gpu(gpus, sizes)
        assert np.array_equal(got_ids, ids)
        assert np.array_equal(got, np.bincount(where, weights=sizes, minlength=ids.size))
    empty_ids, empty = kernel.per_gpu(np.zeros(0, dtype=np.int64), np.zeros(0))
    assert empty_ids.size == empty.size == 0


def by_first_use(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``ids`` in order of first appearance and each entry's index among them,
    by sorting (what the kernels number in one pass)."""
    distinct, first, where = np.unique(ids, return_index=True, return_inverse=True)
    order = np.argsort(first)
    rank = np.empty(distinct.size, dtype=np.int64)
    rank[order] = np.arange(distinct.size)
    return distinct[order], rank[where]


def test_first_use_numbering_matches_sorting_and_leaves_the_scratch_clean() -> None:
    rng = np.random.default_rng(4)
    seen = np.full(300, -1, dtype=np.int64)
    plinks = np.where(rng.random((300, 6)) < 0.3, -1, rng.integers(0, 200, (300, 6)))
    links_seen = np.full(200, -1, dtype=np.int64)
    for _ in range(20):
        ids = rng.integers(0, 300, int(rng.integers(1, 80)))
        distinct, local = kernel.first_use(ids, seen)
        want_distinct, want_local = by_first_use(ids)
        assert np.array_equal(distinct, want_distinct) and np.array_equal(local, want_local)
        assert np.array_equal(distinct[local], ids)
        links, rows = kernel.frame_links(plinks, distinct, links_seen)
        every = plinks[distinct]
        want_links, numbered = by_first_use(every[every >= 0])
        want_rows = np.full(every.shape, -1)
        want_rows[every >= 0] = numbered
        assert np.array_equal(links, want_links) and np.array_equal(rows, want_rows)
        assert (seen == -1).all() and (links_seen == -1).all()
