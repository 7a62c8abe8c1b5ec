"""Profiles know their device; scenario show; progress hooks; the preflight's time note."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from libra_des.cli import main
from libra_des.config import load_scenario
from libra_des.errors import InputError
from libra_des.hardware.profiles.profile import check_device, gpu_family, load_profile
from libra_des.kinds.estimate import Estimate
from libra_des.sim.training import pipeline
from libra_des.sim.training.simulator import simulate_training

ROOT = Path(__file__).resolve().parents[1]
QUICK = str(ROOT / "scenarios" / "quickstart.yaml")
SMALL = ["parallelism.dp=2", "parallelism.cp=4", "parallelism.pp=2", "parallelism.gbs=8",
         "balancer.pool_size=2", "memory.check=warn"]


@pytest.mark.parametrize(("name", "family"), [
    ("H200-SXM", "h200"), ("NVIDIA H200 SXM", "h200"), ("NVIDIA H100 80GB HBM3", "h100"),
    ("A100-SXM", "a100"), ("GB200", "gb200"), ("L40S", "l40s"), ("CPU AMD EPYC", "cpu"),
    ("Some Accelerator", "someaccelerator"),
])
def test_gpu_family(name: str, family: str) -> None:
    assert gpu_family(name) == family


def test_shipped_profiles_name_their_gpu() -> None:
    for name, gpu in (("h200-sxm", "H200-SXM"), ("h100-sxm", "H100-SXM"),
                      ("a100-sxm", "A100-SXM")):
        prof = load_profile(name)
        assert (prof.gpu, prof.gpu_count) == (gpu, 8)
        assert check_device(prof, gpu, "own", name) is None


def test_other_gpu_refused_unless_borrowed() -> None:
    a100 = load_profile("a100-sxm")
    with pytest.raises(InputError) as err:
        check_device(a100, "H200-SXM", "own", "a100-sxm")
    assert err.value.field == "profile" and "A100-SXM" in str(err.value.value)
    warning = check_device(a100, "H200-SXM", "borrowed", "a100-sxm")
    assert warning is not None and "borrowed" in warning
    assert check_device(a100, "gpu", "own", "x") is None  # a topology naming no GPU


def run_json(capsys: pytest.CaptureFixture[str], tmp_path: Path, *sets: str) -> dict[str, object]:
    argv = ["run", QUICK, "--out", str(tmp_path / "r"), "--json"]
    assert main(argv + [a for s in [*SMALL, *sets] for a in ("--set", s)]) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_borrowed_profile_warns_in_the_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    res = run_json(capsys, tmp_path, "profile=a100-sxm", "profile_scope=borrowed")
    (warning,) = res["warnings"]  # type: ignore[misc]
    assert "A100-SXM" in warning and "H200-SXM" in warning
    assert res["scenario"]["profile_scope"] == "borrowed"  # type: ignore[index]
    own = run_json(capsys, tmp_path, "profile=h200-sxm")
    assert "warnings" not in own and "profile_scope" not in own["scenario"]  # type: ignore[operator]


def test_scenario_show_lists_every_field_with_its_source(
    capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["scenario", "show", QUICK, "--set", "parallelism.dp=16", "--json"]) == 0
    rows = {r["field"]: r for r in json.loads(capsys.readouterr().out)["fields"]}
    assert rows["parallelism.dp"]["value"] == 16 and rows["parallelism.dp"]["source"] == "--set"
    assert rows["parallelism.dp"]["default"] == 1
    assert rows["seed"]["source"] == "scenario file"
    assert rows["profile_scope"] == {"field": "profile_scope", "value": "own", "default": "own",
                                     "source": "default"}
    assert rows["model.layers"]["source"] == "workloads/models/qwen3-30b-a3b.yaml"
    assert rows["model.layers"]["default"] == "required"
    assert rows["model.shared_experts"]["source"] == "default"
    scenario = load_scenario(QUICK, ["parallelism.dp=16"])
    assert len(rows) > 60 and rows["steps"]["value"] == scenario.steps


def test_progress_hook_follows_simulated_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline, "WATCH_EVERY", 1)
    seen: list[tuple[float, float]] = []
    scenario = load_scenario(QUICK, SMALL)
    plain = simulate_training(scenario, np.random.default_rng(0))
    watched = simulate_training(scenario, np.random.default_rng(0), None,
                                lambda now, share: seen.append((now, share)))
    assert plain[0].step_time == watched[0].step_time  # watching changes nothing
    times, shares = np.array(seen).T
    assert len(seen) > 10 and np.all(np.diff(times) >= 0) and np.all(np.diff(shares) >= 0)
    assert 0 < shares[-1] <= 1 and times[-1] <= watched[0].step_time


def test_long_runs_note_their_estimate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("libra_des.commands.run.check_feasible",
                        lambda _s: Estimate(1e9, 600.0))
    argv = ["run", QUICK, "--out", str(tmp_path / "r"), "--json"]
    sets = [a for s in SMALL for a in ("--set", s)]
    assert main(argv + sets) == 0
    assert "note: estimated" not in capsys.readouterr().err  # not a terminal: quiet
    assert main([*argv, "--progress", *sets]) == 0
    assert "note: estimated about 1 GB and 10 min" in capsys.readouterr().err


def test_cost_checks_the_device_as_run_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``cost`` with a profile of another GPU: exit 2 with run's own line; borrowed: a warning
    and the measured tier reported as borrowed."""
    sets = [*SMALL, "profile=a100-sxm", "topology=h100-ib-ndr"]
    assert main(["run", QUICK, "--out", str(tmp_path / "r"),
                 *[a for s in sets for a in ("--set", s)]]) == 2
    run_line = capsys.readouterr().err.strip()
    cost = ["cost", "--op", "all_reduce", "--bytes", "1e8", "--group", "8",
            "--profile", "a100-sxm", "--topology", "h100-ib-ndr", "--json"]
    assert main(cost) == 2
    cost_line = capsys.readouterr().err.strip()
    assert cost_line == run_line and cost_line.startswith("error: profile:")
    assert main([*cost, "--profile-scope", "borrowed"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["tier"] == "borrowed" and "A100-SXM" in res["warnings"][0]


def test_every_cost_op_names_its_tier(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--op", "gemm", "--m", "64", "--n", "64", "--k", "64"],
                 ["--op", "attention", "--doc-lengths", "1024", "--heads", "8"],
                 ["--op", "all_to_all", "--bytes", "1e6", "--group", "8"]):
        assert main(["cost", *argv, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["tier"] in ("measured", "borrowed",
                                                               "datasheet")
