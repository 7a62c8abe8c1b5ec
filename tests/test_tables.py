"""Tables: a run's row, a sweep's one-row-per-point table (CSV + Parquet), load_sweep."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

import libra_des
from libra_des.cli import main
from libra_des.results.tables import cell, flatten, run_row, uniform

SCENARIO = str(Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.yaml")
TINY = ["--set", "parallelism.dp=2", "--set", "parallelism.pp=1", "--set",
        "parallelism.gbs=4", "--set", "balancer.pool_size=2", "--set", "model.layers=2"]


def test_flatten_keeps_scalars_under_dotted_names() -> None:
    data = {"a": 1, "b": {"c": 2.5, "d": [1, 2], "e": {"f": "x"}}, "g": None}
    assert flatten(data) == {"a": 1, "b.c": 2.5, "b.e.f": "x", "g": None}
    row = run_row({"mfu": 0.5, "scenario": {"seed": 3, "balancer": {"policy": "libra"}}})
    assert row == {"mfu": 0.5, "scenario.seed": 3, "scenario.balancer.policy": "libra"}


def test_mixed_columns_become_text() -> None:
    assert cell({"nodes": 2}) == '{"nodes":2}' and cell([1]) == "[1]" and cell(3) == 3
    rows = uniform([{"k": 4, "m": 1.0}, {"k": "auto", "m": 2}])
    assert [r["k"] for r in rows] == ["4", "auto"] and [r["m"] for r in rows] == [1.0, 2]


def test_run_writes_its_table(tmp_path: Path) -> None:
    assert main(["run", SCENARIO, *TINY, "--out", str(tmp_path), "--table", "--json"]) == 0
    result = json.loads((tmp_path / "result.json").read_text())
    with (tmp_path / "result.csv").open() as fh:
        (row,) = list(csv.DictReader(fh))
    assert float(row["step_time_s.mean"]) == pytest.approx(result["step_time_s"]["mean"])
    assert row["scenario.balancer.policy"] == "libra"
    pq = pytest.importorskip("pyarrow.parquet")
    table = pq.read_table(tmp_path / "result.parquet").to_pylist()
    assert table[0]["mfu"] == pytest.approx(result["mfu"])


def test_sweep_table_one_row_per_point(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                       ) -> None:
    pytest.importorskip("pandas")
    argv = ["sweep", SCENARIO, *TINY, "--grid", "balancer.policy=ulysses,libra",
            "--grid", "seed=0,1", "--out", str(tmp_path), "--workers", "1", "--json"]
    assert main(argv) == 0
    index = json.loads(capsys.readouterr().out)
    frame = libra_des.load_sweep(tmp_path)
    assert len(frame) == 4 == len(index["points"])
    assert list(frame["balancer.policy"]) == ["ulysses", "ulysses", "libra", "libra"]
    assert list(frame["seed"]) == [0, 1, 0, 1]
    for (_, row), point in zip(frame.iterrows(), index["points"], strict=True):
        assert row["id"] == point["id"]
        assert row["tokens_per_s"] == pytest.approx(point["metrics"]["tokens_per_s"])
    with (tmp_path / "sweep.csv").open() as fh:
        assert len(list(csv.DictReader(fh))) == 4
    assert (tmp_path / "sweep.parquet").is_file()
