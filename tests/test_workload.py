"""Sample-length distributions, corpus files and packing (libra_des.workload)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from libra_des.config import LengthDist, load_workload
from libra_des.errors import InputError
from libra_des.workload.lengths import (
    Z99,
    fit_lognormal,
    fit_to_data,
    moment,
    sample_lengths,
    spliced_law,
)
from libra_des.workload.packing import CorpusStream, cut_pieces, make_stream, pack

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "doc-lengths"


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# ----------------------------------------------------------------------------- lengths


def test_fit_lognormal_closed_form() -> None:
    mu, sigma = fit_lognormal(644, 71_006)
    assert math.exp(mu) == pytest.approx(644)
    assert math.exp(mu + Z99 * sigma) == pytest.approx(71_006)
    assert abs(Z99 - 2.326348) < 1e-6


def test_fit_lognormal_rejects_p99_below_median() -> None:
    with pytest.raises(InputError, match="p99"):
        fit_lognormal(1000, 500)


def test_splice_above_p99_keeps_median_and_p99_exact() -> None:
    dist = LengthDist(median=607, p99=33_000, tail_start=33_000, tail_alpha=1.2)
    law = spliced_law(dist)
    assert law.weight == pytest.approx(0.01, rel=1e-9)
    q = law.quantile(np.array([0.5, 0.99]))
    assert q == pytest.approx([607, 33_000], rel=1e-9)
    # Tail quantiles follow the Pareto law: P(X > x) = w (t/x)^alpha.
    x = law.quantile(np.array([1 - 0.01 * 0.1]))[0]
    assert x == pytest.approx(33_000 * 0.1 ** (-1 / 1.2), rel=1e-9)


@pytest.mark.parametrize(
    "kw",
    [
        {"median": 600, "p99": 6000},
        {"median": 600, "p99": 30_000, "max": 50_000},
        {"median": 600, "p99": 30_000, "tail_start": 30_000, "tail_alpha": 2.5, "max": 200_000},
        {"median": 900, "sigma": 0.5, "tail_start": 2000, "tail_alpha": 3.0, "tail_weight": 0.2},
    ],
)
def test_sample_moments_match_closed_form(kw: dict[str, float]) -> None:
    dist = LengthDist(**kw)
    x = sample_lengths(dist, 400_000, rng(1)).astype(np.float64)
    for k in (1, 2):
        xk = x**k
        stderr = xk.std() / math.sqrt(x.size)
        # 5 standard errors plus token rounding (<= 0.5 token per sample).
        tol = 5 * stderr + k * 0.5 * moment(dist, k) / x.mean()
        assert abs(xk.mean() - moment(dist, k)) < tol


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 500))
@settings(max_examples=25, deadline=None)
def test_lengths_are_bounded_ints_and_seeded(seed: int, n: int) -> None:
    dist = LengthDist(median=500, p99=40_000, min=16, max=60_000, tail_start=40_000,
                      tail_alpha=1.1)
    a = sample_lengths(dist, n, rng(seed))
    assert a.dtype == np.int64 and a.shape == (n,)
    assert np.all((a >= 16) & (a <= 60_000))
    assert np.array_equal(a, sample_lengths(dist, n, rng(seed)))


def test_constant_and_mixture() -> None:
    assert np.all(sample_lengths(LengthDist(kind="constant", value=77), 10, rng()) == 77)
    assert np.all(sample_lengths(LengthDist(kind="constant", median=5), 3, rng()) == 5)
    mix = LengthDist(kind="mixture", components=[
        {"weight": 3, "dist": {"kind": "constant", "value": 10}},
        {"weight": 1, "dist": {"kind": "constant", "value": 1000}},
    ])
    a = sample_lengths(mix, 40_000, rng(2))
    assert set(np.unique(a)) == {10, 1000}
    share = np.mean(a == 1000)
    assert abs(share - 0.25) < 5 * math.sqrt(0.25 * 0.75 / a.size)
    assert moment(mix, 1) == pytest.approx(0.75 * 10 + 0.25 * 1000)


@pytest.mark.parametrize("suffix", [".json", ".txt", ".npy"])
def test_empirical_formats_resample_the_file(tmp_path: Path, suffix: str) -> None:
    values = np.array([3, 50, 700, 9000])
    path = tmp_path / f"lens{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps(values.tolist()))
    elif suffix == ".txt":
        path.write_text("\n".join(map(str, values)) + "\n")
    else:
        np.save(path, values)
    dist = LengthDist(kind="empirical", path=str(path))
    a = sample_lengths(dist, 4000, rng(3))
    assert set(np.unique(a)) == set(values.tolist())
    assert moment(dist, 1) == pytest.approx(values.mean())


@pytest.mark.parametrize("content", [None, "not json [", "[]", "[1, -2]", '{"a": 1}'])
def test_empirical_bad_files_name_the_field(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(InputError) as err:
        sample_lengths(LengthDist(kind="empirical", path=str(path)), 5, rng())
    assert err.value.field == "workload.lengths.path"
    assert "\n" not in err.value.line()


# ----------------------------------------------------------------------------- corpora


@pytest.mark.parametrize(
    ("name", "length", "median", "p99"),
    [("longctx-1m", 1_048_576, 644, 71_006), ("longctx-256k", 262_144, 607, 33_000)],
)
def test_paper_corpora_median_p99_within_5pct(
    name: str, length: int, median: float, p99: float
) -> None:
    w = load_workload(name)
    assert w.packed_length == length and w.lengths is not None
    a = sample_lengths(w.lengths, 200_000, rng(4))
    assert abs(np.median(a) / median - 1) < 0.05
    assert abs(np.percentile(a, 99) / p99 - 1) < 0.05


@pytest.mark.parametrize(
    ("name", "data", "tail_quantile"),
    [("wlbllm-docs", "wlbllm.json", 0.98), ("prolong-docs", "prolong.json", 0.9)],
)
def test_doc_length_fits_against_the_data(name: str, data: str, tail_quantile: float) -> None:
    path = DATA / data
    if not path.is_file():
        pytest.skip(f"shared data folder absent ({path}); the fit is checked where it exists")
    real = np.asarray(json.loads(path.read_text()), dtype=np.float64)
    dist = load_workload(name).lengths
    assert dist is not None
    # The committed numbers are exactly what the documented fit gives on the data.
    refit = fit_to_data(real, tail_quantile)
    committed = dist.model_dump()
    for key, value in refit.items():
        assert committed[key] == pytest.approx(value, rel=1e-6), key
    fake = sample_lengths(dist, real.size, rng(5)).astype(np.float64)
    assert abs(np.median(fake) / np.median(real) - 1) < 0.07
    assert abs(np.percentile(fake, 99) / np.percentile(real, 99) - 1) < 0.2
    assert abs(fake.mean() / real.mean() - 1) < 0.1
    assert abs((fake**2).mean() / (real**2).mean() - 1) < 0.25
    # Two-sample Kolmogorov-Smirnov distance (documented: 0.13 wlbllm, 0.06 prolong).
    grid = np.union1d(real, fake)
    cdf = [np.searchsorted(np.sort(x), grid, side="right") / x.size for x in (real, fake)]
    assert np.max(np.abs(cdf[0] - cdf[1])) < 0.15


# ----------------------------------------------------------------------------- packing


def test_cut_pieces_known_answer() -> None:
    pieces, ids = cut_pieces(np.array([5, 10, 23, 3]), 10, first_id=7)
    assert pieces.tolist() == [5, 10, 10, 10, 3, 3]
    assert ids.tolist() == [7, 8, 9, 9, 9, 10]


def test_cut_pieces_without_long_samples_is_a_copy_with_consecutive_ids() -> None:
    lengths = np.array([5, 10, 3], dtype=np.int64)
    pieces, ids = cut_pieces(lengths, 10, first_id=7)
    assert pieces.tolist() == [5, 10, 3] and ids.tolist() == [7, 8, 9]
    lengths[0] = 99  # the pieces do not alias the caller's array
    assert pieces[0] == 5


def test_cut_pieces_refuses_absurd_lengths() -> None:
    with pytest.raises(InputError, match=r"workload\.lengths\.max"):
        cut_pieces(np.array([2**60]), 1024)


def test_pack_next_fit_known_answer() -> None:
    b = pack(np.array([4, 5, 3, 8, 1, 1, 25, 2]), 10)
    assert [b.seq(i).tolist() for i in range(len(b))] == [
        [4, 5], [3], [8, 1, 1], [10], [10], [5, 2]
    ]
    assert b.sample_ids.tolist() == [0, 1, 2, 3, 4, 5, 6, 6, 6, 7]
    assert b.sum_sq().tolist() == [41.0, 9.0, 66.0, 100.0, 100.0, 29.0]
    assert b.tokens().tolist() == [9, 3, 10, 10, 10, 7]


@given(
    lengths=st.lists(st.integers(1, 300), min_size=1, max_size=200),
    packed=st.integers(1, 120),
    seed=st.integers(0, 1000),
)
@settings(max_examples=60, deadline=None)
def test_packing_invariants(lengths: list[int], packed: int, seed: int) -> None:
    raw = np.array(lengths)
    b = pack(raw, packed)
    tokens = b.tokens()
    assert np.all(tokens <= packed) and np.all(b.counts() >= 1)
    # Next-fit: the first piece of each sequence did not fit into the one before it.
    firsts = b.lengths[b.offsets[1:-1]]
    assert np.all(tokens[:-1] + firsts > packed)
    # Samples are preserved: pieces re-joined by id give the raw lengths, in order.
    assert np.array_equal(np.bincount(b.sample_ids, weights=b.lengths), raw)
    assert np.all(np.diff(b.sample_ids) >= 0)
    loop = [float(sum(x * x for x in b.seq(i).tolist())) for i in range(len(b))]
    assert b.sum_sq().tolist() == loop
    order = rng(seed).permutation(len(b))
    t = b.take(order)
    assert [t.seq(i).tolist() for i in range(len(t))] == [b.seq(i).tolist() for i in order]
    assert sorted(t.sample_ids.tolist()) == sorted(b.sample_ids.tolist())


@pytest.mark.parametrize("packed_length", [8192, 16384, 20_000])
def test_stream_windows_continue_one_next_fit_packing(packed_length: int) -> None:
    """Windows of a stream are one next-fit packing of its draws, ids included, whether
    samples are cut from the first draw on (L 8,192), only from a later one (16,384: the ids
    kept implicit until then), or never (20,000 = the law's max)."""
    dist = LengthDist(median=300, p99=9000, max=20_000)
    stream = CorpusStream(dist, packed_length, rng(6))
    windows = [stream.next_window(16) for _ in range(5)]
    assert all(len(w) == 16 for w in windows)
    # Same draws packed in one go (Generator.random(n1), random(n2) == random(n1 + n2)).
    whole = pack(sample_lengths(dist, stream.next_id, rng(6)), packed_length)
    seqs = [w.seq(i).tolist() for w in windows for i in range(16)]
    assert seqs == [whole.seq(i).tolist() for i in range(80)]
    ids = np.concatenate([w.sample_ids for w in windows])
    assert np.array_equal(ids, whole.sample_ids[: ids.size])


def test_make_stream_needs_lengths_and_rejects_bad_d() -> None:
    w = load_workload("longctx-256k")
    stream = make_stream(w, rng())
    with pytest.raises(InputError):
        stream.next_window(0)
    with pytest.raises(InputError, match=r"workload\.lengths"):
        make_stream(w.model_copy(update={"lengths": None}), rng())


def test_normal_law_matches_scipy_and_round_trips() -> None:
    """AS 241's quantile and the erfc CDF against scipy.special's (within a few ulps, and
    1e-13 relative far in the left tail, where erfc's argument rounding shows), across the
    three regions of AS 241 and the edges; and the quantile inverts the CDF."""
    import scipy.special

    from libra_des.workload import normal

    gen = rng()
    p = np.concatenate([gen.random(20_000), 10.0 ** -gen.uniform(0, 300, 5_000),
                        1 - 10.0 ** -gen.uniform(0, 15, 5_000), [0.075, 0.925, 0.5]])
    ours, theirs = normal.ndtri(p), scipy.special.ndtri(p)
    assert np.all(np.abs(ours - theirs) <= 8 * np.spacing(np.abs(theirs)))
    assert normal.ndtri(0.0) == -math.inf and normal.ndtri(1.0) == math.inf
    assert np.isnan(normal.ndtri(np.array([-0.1, 1.1]))).all()
    assert isinstance(normal.ndtri(0.99), float)
    from libra_des.workload.lengths import Z99

    assert normal.ndtri(0.99) == Z99 == scipy.special.ndtri(0.99)
    assert normal.ndtri(np.full((2, 3), 0.3)).shape == (2, 3)
    x = gen.normal(size=2_000) * 6
    cdf = np.array([normal.ndtr(float(v)) for v in x])
    assert np.allclose(cdf, scipy.special.ndtr(x), rtol=1e-13, atol=0)
    left = x < 1  # right of it 1 - cdf keeps too few digits for a round trip
    assert np.allclose(normal.ndtri(cdf[left]), x[left], rtol=1e-12, atol=1e-12)
