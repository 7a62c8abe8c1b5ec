"""``libra-des sweep``: grid expansion, resume, determinism, bad input, end to end."""

from __future__ import annotations

import json
import math
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from libra_des.cli import main
from libra_des.config import ROOT, Scenario
from libra_des.errors import InputError
from libra_des.runs import sweep
from libra_des.runs.sweep import Axis, SweepSpec, expand, local_executor, parse_axis, split_values

SCENARIO = str(ROOT / "scenarios" / "quickstart.yaml")
# The small layout of tests/test_training.py: 64 GPUs, one step, the 256K corpus.
SMALL = [
    "topology=h200-roce-railopt", "parallelism.dp=8", "parallelism.cp=4", "parallelism.pp=2",
    "parallelism.gbs=32", "balancer.pool_size=4", "steps=1", "workload=longctx-256k",
]
SETS = [arg for s in SMALL for arg in ("--set", s)]
POLICIES = ["--grid", "balancer.policy=ulysses,libra"]


def spec(*axes: str) -> SweepSpec:
    return SweepSpec(SCENARIO, tuple(SMALL), tuple(parse_axis(a) for a in axes))


def counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Count in-process simulate calls (one worker runs points in this process)."""
    calls: list[str] = []
    real = sweep.simulate_timed

    def fake(scenario: Scenario, **kw: Any) -> tuple[dict[str, Any], Any, dict[str, Any]]:
        calls.append(scenario.balancer.policy)
        return real(scenario, **kw)

    monkeypatch.setattr(sweep, "simulate_timed", fake)
    return calls


def without_wall(path: Path) -> Any:
    data = json.loads(path.read_text())
    for entry in data.get("points", [data]):
        entry.pop("wall_s", None)
    return data


# ----------------------------------------------------------------------------- expansion


def test_split_values_protects_brackets_and_quotes() -> None:
    assert split_values("1, [2,3], {a: 4, b: 5}, 'x,y'") == ["1", "[2,3]", "{a: 4, b: 5}",
                                                              "'x,y'"]
    assert split_values("ulysses") == ["ulysses"]


def test_zip_axis_moves_keys_together() -> None:
    axis = parse_axis("parallelism.dp=4,8; balancer.pool_size=2,4", zipped=True)
    assert axis.keys == ("parallelism.dp", "balancer.pool_size")
    assert axis.settings(1) == ("parallelism.dp=8", "balancer.pool_size=4")
    points = expand([parse_axis("balancer.policy=ulysses,libra"), axis])
    assert [c for c, _ in points] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert points[1][1] == ("balancer.policy=ulysses", "parallelism.dp=8", "balancer.pool_size=4")


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=0, max_size=4))
def test_expansion_is_the_cartesian_product(sizes: list[int]) -> None:
    axes = [Axis((f"k{i}",), tuple((str(v),) for v in range(n))) for i, n in enumerate(sizes)]
    points = expand(axes)
    assert len(points) == math.prod(sizes)
    coords = [c for c, _ in points]
    assert coords == sorted(set(coords))  # distinct, first axis outermost
    for c, sets in points:
        assert sets == tuple(f"k{i}={v}" for i, v in enumerate(c))


@pytest.mark.parametrize(("text", "zipped"), [
    ("novalue", False), ("=1,2", False), ("a..b=1", False), ("a=1,,2", False),
    ("a=1,2;b=1", True), ("a=1;a=2", True),
])
def test_bad_axis_syntax_is_input_error(text: str, zipped: bool) -> None:
    with pytest.raises(InputError):
        parse_axis(text, zipped)


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(("argv", "needle"), [
    (["--grid", "policy"], "--grid"),
    (["--grid", "parallelism.dpp=1,2"], "parallelism.dpp"),
    (["--grid", "balancer.policy=ulysses,nope"], "balancer.policy"),
    (["--zip", "parallelism.dp=4,8;balancer.pool_size=2"], "--zip"),
    (["--grid", "steps=1,2", "--zip", "steps=3;seed=1"], "steps"),
    (["--workers", "0"], "--workers"),
    (["--workers", "two"], "--workers"),
])
def test_bad_input_exits_2_before_any_work(
    argv: list[str], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sweep"
    code = main(["sweep", SCENARIO, *SETS, *argv, "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("error:") and needle in err[0], err
    assert not out.exists()  # nothing was simulated or written


def test_missing_scenario_and_missing_ray(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sweep", str(tmp_path / "nope.yaml"), "--out", str(tmp_path / "o")]) == 2
    assert "nope.yaml" in capsys.readouterr().err
    try:
        import ray  # noqa: F401
    except ImportError:
        assert main(["sweep", SCENARIO, *SETS, "--ray", "--out", str(tmp_path / "o")]) == 2
        assert "ray" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


# ----------------------------------------------------------------------------- end to end


def test_two_point_sweep_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sweep"
    code = main(["sweep", SCENARIO, *SETS, *POLICIES, "--workers", "2", "--out", str(out),
                 "--json"])
    assert code == 0
    index = json.loads(capsys.readouterr().out)
    assert index == json.loads((out / "sweep.json").read_text())
    points = index["points"]
    assert [p["overrides"] for p in points] == [{"balancer.policy": "ulysses"},
                                                {"balancer.policy": "libra"}]
    assert sorted(f.name for f in (out / "points").glob("[!.]*")) == sorted(
        f"{p['id']}.json" for p in points)
    for p in points:
        result = json.loads((out / p["file"]).read_text())
        assert result["policy"] == p["overrides"]["balancer.policy"]
        assert p["metrics"]["tokens_per_s"] == result["tokens_per_s"] > 0
        assert p["metrics"]["step_time_s.mean"] == result["step_time_s"]["mean"]
    assert points[0]["metrics"] != points[1]["metrics"]


def test_resume_skips_finished_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = counting(monkeypatch)
    first = sweep.run_sweep(spec("balancer.policy=ulysses,libra"), tmp_path, local_executor(1))
    assert calls == ["ulysses", "libra"] and first.ran == 2 and first.reused == 0
    mtimes = {f: f.stat().st_mtime_ns for f in (tmp_path / "points").iterdir()}
    again = sweep.run_sweep(spec("balancer.policy=ulysses,libra"), tmp_path, local_executor(1))
    assert calls == ["ulysses", "libra"] and again.ran == 0 and again.reused == 2
    assert {f: f.stat().st_mtime_ns for f in (tmp_path / "points").iterdir()} == mtimes
    # A point file edited since (or foreign) is refused before any point runs, unchanged.
    first.records[0].path.write_text('{"scenario": {}}')
    with pytest.raises(InputError, match="nobody changed since"):
        sweep.run_sweep(spec("balancer.policy=ulysses,libra"), tmp_path, local_executor(1))
    assert calls == ["ulysses", "libra"]
    assert first.records[0].path.read_text() == '{"scenario": {}}'
    # A lost point file is recomputed, and only that one.
    first.records[0].path.unlink()
    sweep.run_sweep(spec("balancer.policy=ulysses,libra"), tmp_path, local_executor(1))
    assert calls[2:] == ["ulysses"]


def test_equal_points_run_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counting(monkeypatch)
    res = sweep.run_sweep(spec("seed=0,0"), tmp_path, local_executor(1))
    assert len(calls) == 1 and len(res.records) == 2
    assert res.records[0].point.id == res.records[1].point.id


def test_same_grid_same_files(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        sweep.run_sweep(spec("balancer.policy=ulysses,libra"), out, local_executor(1))
    names = sorted(f.name for f in (a / "points").glob("[!.]*"))
    assert names == sorted(f.name for f in (b / "points").glob("[!.]*")) and len(names) == 2
    for name in names:
        assert without_wall(a / "points" / name) == without_wall(b / "points" / name)
    assert without_wall(a / "sweep.json") == without_wall(b / "sweep.json")


def test_failed_point_is_recorded_and_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = sweep.simulate_timed

    def flaky(scenario: Scenario, **kw: Any) -> tuple[dict[str, Any], Any, dict[str, Any]]:
        if scenario.balancer.policy == "libra":
            raise RuntimeError("boom")
        return real(scenario, **kw)

    monkeypatch.setattr(sweep, "simulate_timed", flaky)
    argv = ["sweep", SCENARIO, *SETS, *POLICIES, "--workers", "1", "--out", str(tmp_path)]
    assert main(argv) == 1
    assert "boom" in capsys.readouterr().err
    index = json.loads((tmp_path / "sweep.json").read_text())
    assert "error" not in index["points"][0] and "boom" in index["points"][1]["error"]
    monkeypatch.setattr(sweep, "simulate_timed", real)
    calls = counting(monkeypatch)
    assert main(argv) == 0
    assert calls == ["libra"]


@dataclass(eq=False)
class FakeRef:
    value: Any


class FakeRay(types.ModuleType):
    """The slice of Ray's API the sweep uses; tasks finish in reverse submission order."""

    def __init__(self) -> None:
        super().__init__("ray")
        self.started = False

    def is_initialized(self) -> bool:
        return self.started

    def init(self, **_kw: Any) -> None:
        self.started = True

    def remote(self, **_opts: Any) -> Callable[[Callable[..., Any]], Any]:
        return lambda fn: types.SimpleNamespace(remote=lambda *a: FakeRef(fn(*a)))

    def wait(self, refs: list[FakeRef], num_returns: int) -> tuple[list[FakeRef], list[FakeRef]]:
        return refs[-num_returns:], refs[:-num_returns]

    def get(self, ref: FakeRef) -> Any:
        return ref.value


def test_ray_backend_keeps_expansion_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeRay()
    monkeypatch.setitem(sys.modules, "ray", fake)
    argv = ["sweep", SCENARIO, *SETS, *POLICIES, "--out", str(tmp_path), "--ray"]
    assert main([*argv, "--workers", "2"]) == 2  # Ray schedules; a local pool size is wrong
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0 and fake.started
    index = json.loads(capsys.readouterr().out)
    assert [p["overrides"]["balancer.policy"] for p in index["points"]] == ["ulysses", "libra"]
    for p in index["points"]:
        assert json.loads((tmp_path / p["file"]).read_text())["policy"] == (
            p["overrides"]["balancer.policy"])
