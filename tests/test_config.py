"""Scenario loading: overrides, includes, and the one-line bad-input contract (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from libra_des.cli import main
from libra_des.config import ROOT, load_scenario

BASE = {
    "kind": "training",
    "seed": 1,
    "topology": "h200-8x-nvswitch",
    "model": "qwen3-30b-a3b",
    "workload": "longctx-256k",
    "parallelism": {"dp": 4, "pp": 1, "cp": 2, "gbs": 8},
    "balancer": {"policy": "libra", "pool_size": 2, "heads_split": 2, "chunks": 4},
}


def write(tmp_path: Path, data: object, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return path


def bad_input(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run the CLI, require exit 2 and exactly one stderr line; return that line."""
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_includes_and_overrides_resolve(tmp_path: Path) -> None:
    sets = ["parallelism.dp=8", "workload.lengths.kind=constant"]
    sc = load_scenario(write(tmp_path, BASE), sets)
    assert sc.parallelism.dp == 8
    assert sc.model.layers == 48 and sc.model.heads_q == 32
    assert sc.workload.packed_length == 262_144
    assert sc.workload.lengths is not None and sc.workload.lengths.kind == "constant"
    assert Path(str(sc.topology)).parent == ROOT / "topologies"


def test_same_file_same_object(tmp_path: Path) -> None:
    path = write(tmp_path, BASE)
    assert load_scenario(path) == load_scenario(path)


CASES = [
    ("unknown key", {**BASE, "colour": "blue"}, [], "colour"),
    ("wrong type", {**BASE, "seed": "abc"}, [], "seed"),
    ("P does not divide DP", BASE, ["balancer.pool_size=3"], "balancer.pool_size"),
    ("GBS not divisible", BASE, ["parallelism.gbs=10"], "parallelism.gbs"),
    ("H does not divide heads_q", BASE, ["balancer.heads_split=5"], "balancer.heads_split"),
    ("M does not divide heads_q/H", BASE, ["balancer.chunks=3"], "balancer.chunks"),
    ("zero size", BASE, ["parallelism.dp=0"], "parallelism.dp"),
    ("negative size", BASE, ["balancer.block_size=-4"], "balancer.block_size"),
    ("bad schedule", BASE, ["parallelism.schedule=zigzag"], "parallelism.schedule"),
    ("unknown policy", BASE, ["balancer.policy=magic"], "balancer.policy"),
    ("missing model file", {**BASE, "model": "nope.yaml"}, [], "model"),
    ("bad --set", BASE, ["parallelism"], "--set"),
]


@pytest.mark.parametrize(("label", "data", "sets", "field"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    label: str,
    data: dict[str, object],
    sets: list[str],
    field: str,
) -> None:
    argv = ["run", str(write(tmp_path, data)), "--out", str(tmp_path / "out")]
    for s in sets:
        argv += ["--set", s]
    line = bad_input(capsys, argv)
    assert line.startswith(f"error: {field}"), line
    assert "allowed:" in line
    assert not (tmp_path / "out").exists(), "no output may be left behind"


def test_missing_scenario_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = bad_input(capsys, ["run", str(tmp_path / "absent.yaml")])
    assert "absent.yaml" in line and "existing" in line


def test_malformed_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = bad_input(capsys, ["run", str(write(tmp_path, "kind: [training\nseed: 1\n"))])
    assert "well-formed YAML" in line


def test_unreadable_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "dir.yaml"
    path.mkdir()
    line = bad_input(capsys, ["run", str(path)])
    assert "readable" in line


def test_malformed_included_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "layers: [1,\n", "m.yaml")
    line = bad_input(capsys, ["run", str(write(tmp_path, {**BASE, "model": "m.yaml"}))])
    assert line.startswith("error: model")
