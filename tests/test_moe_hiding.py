"""The ``moe_hiding`` study: one row per (input length, batch, host speed) cell, and a slower
host (through the profile's ``host`` block, not code) lengthens Libra's host stages."""

from __future__ import annotations

from pathlib import Path

import pytest

from paper_figs import common
from paper_figs.libra_moe import hiding


def test_the_data_function_yields_one_row_per_cell(tmp_path: Path) -> None:
    opts = common.FigOptions(tmp_path, tiny=True, workers=1)
    g = hiding.grid(opts)
    rows = hiding.rows(opts)
    cells = {(r["seq_len"], r["batch"], r["host_factor"]) for r in rows}
    assert len(rows) == len(cells) == len(g.seqs) * len(g.batches) * len(g.hosts)
    for s in g.seqs:
        for b in g.batches:
            slow, fast = (next(r for r in rows if r["seq_len"] == s and r["batch"] == b
                               and r["host_factor"] == f) for f in (max(g.hosts), min(g.hosts)))
            # Host stages scale with the per-call costs (the copies' latency does not).
            assert slow["libra_host_ms"] > fast["libra_host_ms"] * 0.5 * max(g.hosts)
            assert slow["libra_exposed_host_ms"] >= fast["libra_exposed_host_ms"]


def test_the_host_profile_scales_the_cpu_prices_only() -> None:
    prices = {n: {"value": 1.0, "source": "s"} for n in (*hiding.CPU_PRICES, "copy_s")}
    host = hiding.host_profile(3.0, prices)["host"]
    assert all(host[n]["value"] == 3.0 for n in hiding.CPU_PRICES)
    assert host["copy_s"]["value"] == 1.0


@pytest.mark.parametrize(("ys", "want"), [([-2.0, -1.0, 1.0], 2.0 ** 1.5), ([1.0, 2.0, 3.0], 1.0),
                                          ([-1.0, -1.0, -1.0], None)])
def test_crossing(ys: list[float], want: float | None) -> None:
    got = hiding.crossing([1.0, 2.0, 4.0], ys)
    assert got == (None if want is None else pytest.approx(want))
