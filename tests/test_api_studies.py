"""The API's study functions (what ``paper_figs/`` draws from) equal their commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from libra_des import api
from libra_des.cli import main
from libra_des.config import ROOT
from libra_des.errors import InputError

QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"
TINY = ["parallelism.dp=2", "parallelism.pp=1", "parallelism.gbs=4", "balancer.pool_size=2",
        "model.layers=2", "steps=1"]


def without_timing(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "plan_seconds"} for r in data["results"]]


def test_replay_plans_is_the_plan_command(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--workload", "longctx-256k", "--gbs", "16", "--windows", "2", "--pool-size", "2,4",
            "--policy", "vrsp,random", "--block-size", "8192,16384"]
    assert main(["plan", *argv, "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    data = api.replay_plans("longctx-256k", gbs=16, windows=2, pool_sizes=[2, 4],
                            policies=["vrsp", "random"], block_sizes=[8192, 16384])
    assert data["windows"] == cli["windows"] == 2 and data["slack"] == pytest.approx(0.03)
    assert without_timing(data) == without_timing(cli)
    assert len(data["results"]) == 2 * 2 * 2


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"gbs": 0}, "gbs"), ({"pool_sizes": [2, 0]}, "pool_sizes"), ({"pool_sizes": "8"},
     "pool_sizes"), ({"policies": []}, "policies"), ({"windows": True}, "windows"),
    ({"policies": ["nope"]}, "--policy"), ({"pool_sizes": [3]}, "--pool-size"),
    ({"pool_size": [2]}, "replay_plans"),
])
def test_replay_plans_bad_input_is_one_line(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as info:
        api.replay_plans("longctx-256k", **{"gbs": 16, "windows": 1, **kwargs})
    assert info.value.line().startswith(f"error: {field}: got ")


def test_run_sweep_is_the_sweep_command(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    sets = [a for s in TINY for a in ("--set", s)]
    assert main(["sweep", str(QUICKSTART), *sets, "--zip",
                 "balancer.policy=ulysses,libra;balancer.vrsp=false,true",
                 "--out", str(tmp_path / "cli"), "--workers", "1", "--json"]) == 0
    capsys.readouterr()
    cli = json.loads((tmp_path / "cli" / "sweep.json").read_text())
    axes = [{"balancer.policy": ["ulysses", "libra"], "balancer.vrsp": [False, True]}]
    run = api.run_sweep(QUICKSTART, axes, tmp_path / "api", TINY)
    assert run.ran == 2 and run.reused == 0
    assert [p.coords for p in run.points] == [(0,), (1,)]
    assert [dict(p.overrides) for p in run.points] == [p["overrides"] for p in cli["points"]]
    ids = [p["id"] for p in cli["points"]]
    for point, pid in zip(run.points, ids, strict=True):
        stored = json.loads((tmp_path / "cli" / "points" / f"{pid}.json").read_text())
        assert {k: v for k, v in point.result.items() if k != "wall_s"} == {
            k: v for k, v in stored.items() if k != "wall_s"}
    again = api.run_sweep(QUICKSTART, axes, tmp_path / "api", TINY)
    assert again.ran == 0 and again.reused == 2  # resumed: the same folder, the same ids


@pytest.mark.parametrize("axes", [[{}], [{"seed": [0, 1], "steps": [1]}], ["seed=0"]])
def test_run_sweep_bad_axes_raise_before_work(tmp_path: Path, axes: Any) -> None:
    with pytest.raises(InputError):
        api.run_sweep(QUICKSTART, axes, tmp_path / "s", TINY)
    assert not (tmp_path / "s").exists()


def test_moe_systems_and_noise_factors() -> None:
    systems = api.moe_systems()
    assert next(iter(systems)) == "sglang" and "libra" in systems
    a, b = api.noise_factors(16, 3, seed=1), api.noise_factors(16, 3, seed=1)
    assert a.shape == (3, 16) and np.array_equal(a, b) and np.all(a > 0)
    assert not np.array_equal(a, api.noise_factors(16, 3, seed=2))
    with pytest.raises(InputError):
        api.noise_factors(0, 3)
