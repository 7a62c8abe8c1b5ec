"""The winner map (paper_figs/libra_train/winner_map.py): its CSV cells, winners and tail law."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from libra_des.config.loading import load_workload
from libra_des.workload.quantile_law import QuantileLaw, rescaled_tail_knots
from paper_figs import common
from paper_figs.libra_train import winner_map

pytest.importorskip("matplotlib")


def test_one_row_per_cell_and_the_winner_follows_the_ratio(tmp_path: Path) -> None:
    opts = common.FigOptions(tmp_path, tiny=True, workers=1)
    tail = winner_map.pairs("1m", "tiny")[0]
    assert (len(tail.y.values), len(tail.x.values)) == (2, 2)
    rows = winner_map.collect(opts, "1m", (tail,))
    drawn = winner_map.draw(opts, ("1m",), {"1m": (tail,)}, rows)
    with drawn.files[-1].open() as fh:
        written = list(csv.DictReader(fh))
    cells = {(r["y_value"], r["x_value"], r["baseline"]) for r in written}
    assert len(written) == len(cells) == 2 * 2 * len(winner_map.BASELINES)
    for r in written:
        ratio = float(r["ratio"])
        assert ratio == pytest.approx(float(r["baseline_ms"]) / float(r["libra_ms"]), rel=1e-9)
        expected = "Libra" if ratio > 1 else r["baseline"] if ratio < 1 else "tie"
        assert r["winner"] == expected
        assert r["mode"] == "tiny" and "tiny" in r["reduction"]
    # The tail factor moved the runs: the two p99 rows do not give the same stragglers.
    libra = {r["y_value"]: r["libra_ms"] for r in written if r["x_value"] == written[0]["x_value"]}
    assert len(set(libra.values())) == 2


def test_stretched_knots_is_the_law_rescaled_tail_knots_builds() -> None:
    """Stretching the shipped 256K law's p99 by 2 gives (to rounding) the law built from the
    paper's median and twice its p99 over the same public corpus's tail."""
    shipped = load_workload("paper-256k").lengths
    corpus = load_workload("public-wlbllm-256k").lengths
    assert shipped is not None and corpus is not None
    same = winner_map.stretched_knots(shipped.knots, 1.0)
    np.testing.assert_allclose(np.array(same), np.array(shipped.knots), rtol=2e-3, atol=0.15)
    stretched = np.array(winner_map.stretched_knots(shipped.knots, 2.0))
    built = np.array(rescaled_tail_knots(607, 66000, QuantileLaw.of(corpus.knots)))
    np.testing.assert_array_equal(stretched[:, 0], built[:, 0])
    np.testing.assert_allclose(stretched[1:, 1], built[1:, 1], rtol=5e-3)
    law = QuantileLaw.of(stretched.tolist())
    assert float(law.quantile(np.array([0.5]))[0]) == pytest.approx(607, rel=1e-3)
    assert float(law.quantile(np.array([0.99]))[0]) == pytest.approx(66000, rel=1e-3)
