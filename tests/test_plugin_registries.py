"""Schedules, length laws, network models and cost ops are registered plug-ins.

Each toy in ``tests/`` (``toy_schedule``, ``toy_length_law``, ``toy_network``,
``toy_cost_op``) is one file that registers itself; importing it is all a scenario or a cost
query needs to name it, and none of them is named anywhere in the package.
"""

from __future__ import annotations

import json
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import simpy
import toy_cost_op
import toy_length_law
import toy_network
import toy_schedule

import libra_des
from libra_des import registry
from libra_des.cli import main
from libra_des.config import ROOT
from libra_des.errors import InputError
from libra_des.hardware import cost_ops
from libra_des.registry import Registry, shipped_then_entry_points
from libra_des.sim.network import models as network_models
from libra_des.sim.network.model import NetworkModel
from libra_des.sim.training import schedules
from libra_des.workload import lengths

QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"
BREAKDOWN = ROOT / "scenarios" / "paper-moe-breakdown.yaml"
#: 32 GPUs over 4 nodes, one step (as tests/test_training.py's fidelity check).
TRAIN = ["topology=h200-roce-railopt", "parallelism.dp=4", "parallelism.cp=4",
         "parallelism.pp=2", "parallelism.gbs=16", "balancer.pool_size=2", "steps=1",
         "workload=longctx-256k", "model.layers=8"]
#: Equal op times and free communication: the closed forms hold.
EQUAL = ["variance.enabled=false", "comm_free=true", "workload.lengths.kind=constant",
         "workload.lengths.value=4096"]
MOE = ["model.layers=3", "workload.batches=1", "workload.batch=8", "variance.enabled=false"]
PACKAGE = Path(libra_des.__file__).resolve().parent


def train(*extra: str) -> libra_des.Result:
    return libra_des.simulate(QUICKSTART, [*TRAIN, *extra], seed=1)


@pytest.mark.parametrize(("registered", "toy", "shipped"), [
    (schedules, toy_schedule.SCHEDULE, ("gpipe", "1f1b", "interleaved")),
    (lengths, toy_length_law.LAW, ("lognormal_pareto", "empirical", "constant", "mixture")),
    (network_models, toy_network.MODEL, ("fast", "detailed")),
])
def test_shipped_first_then_the_toy(registered: Any, toy: Any, shipped: tuple[str, ...]) -> None:
    assert registered.names()[: len(shipped)] == shipped
    assert toy.name in registered.names()[len(shipped):]


def test_unknown_names_are_one_line_listing_the_registry(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for key, toy in (("parallelism.schedule", "toy_serial"), ("fidelity", "toy_ideal"),
                     ("workload.lengths.kind", "toy_uniform")):
        code = main(["run", str(QUICKSTART), "--set", f"{key}=magic", "--out", str(tmp_path)])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1, err
        assert err.startswith(f"error: {key}: got 'magic'; allowed: ") and toy in err, err
    assert list(tmp_path.iterdir()) == []  # refused before any work
    assert main(["cost", "--op", "magic"]) == 2
    assert "toy_copy" in capsys.readouterr().err


def test_toy_schedule_runs_with_its_closed_form_bubble() -> None:
    """One microbatch in the pipeline at a time: (p - 1) / p of the step is bubble."""
    res = train(*EQUAL, "parallelism.schedule=toy_serial")
    assert res.to_dict()["scenario"]["parallelism"]["schedule"] == "toy_serial"
    assert res["bubble_fraction"] == pytest.approx(1 / 2, rel=1e-6)
    one_f_one_b = train(*EQUAL)
    assert res["step_time_s"]["mean"] > one_f_one_b["step_time_s"]["mean"]


def test_a_schedule_without_chunks_refuses_them() -> None:
    with pytest.raises(InputError, match=r"virtual_stages.*interleaved"):
        train("parallelism.schedule=toy_serial", "parallelism.virtual_stages=2")


def test_a_nested_law_names_its_own_path() -> None:
    parts = '[{weight: 1, dist: {kind: constant}}]'
    with pytest.raises(InputError) as err:
        train("workload.lengths.kind=mixture", f"workload.lengths.components={parts}")
    assert err.value.field == "workload.lengths.components.0.dist.value"
    with pytest.raises(InputError) as err:
        train("workload.lengths.kind=mixture",
              "workload.lengths.components=[{weight: 1, dist: {kind: magic}}]")
    assert err.value.field == "workload.lengths.components.0.dist.kind"
    assert "toy_uniform" in err.value.allowed


def test_toy_network_replays_training_and_times_moe() -> None:
    """Infinite bandwidth: no slower than the flow model on the same plans, and it ran."""
    assert isinstance(toy_network.IdealNetwork(simpy.Environment()), NetworkModel)
    ideal, flows = train("fidelity=toy_ideal"), train("fidelity=detailed")
    assert ideal["attention_flops_per_step"] == flows["attention_flops_per_step"]
    assert 0 < ideal["step_time_s"]["mean"] <= flows["step_time_s"]["mean"]
    assert ideal["events"] > train()["events"]  # replayed on the network, not folded
    moe_ideal = libra_des.simulate(BREAKDOWN, [*MOE, "fidelity=toy_ideal"], seed=1)
    moe_fast = libra_des.simulate(BREAKDOWN, [*MOE], seed=1)
    assert moe_ideal["bytes_moved"] == moe_fast["bytes_moved"]
    assert moe_ideal["moe_layer_s"] < moe_fast["moe_layer_s"]


def test_toy_length_law_samples_its_closed_form_moment() -> None:
    dist = libra_des.load_scenario(QUICKSTART, [
        "workload.lengths.kind=toy_uniform", "workload.lengths.min=1024",
        "workload.lengths.max=8192"]).workload.lengths
    assert dist is not None
    drawn = lengths.sample_lengths(dist, 200_000, np.random.default_rng(0))
    assert drawn.min() >= 1024 and drawn.max() <= 8192
    assert float(drawn.mean()) == pytest.approx(lengths.moment(dist, 1), rel=0.01)
    assert lengths.length_cv(dist) == pytest.approx(float(drawn.std() / drawn.mean()), rel=0.02)
    plan = libra_des.step_plan(QUICKSTART, [*TRAIN, "workload.lengths.kind=toy_uniform",
                                            "workload.lengths.max=65536"])
    assert plan.window.lengths.max() <= 65536
    with pytest.raises(InputError, match=r"workload\.lengths\.max"):
        train("workload.lengths.kind=toy_uniform", "workload.lengths.max=null")


def test_toy_cost_op_through_the_api_and_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    seconds = libra_des.cost("toy_copy", nbytes=1 << 30)
    hbm = libra_des.cost_model().profile.hbm_bw
    assert seconds == pytest.approx(2 * (1 << 30) / hbm, rel=1e-12)
    assert main(["cost", "--op", "toy_copy", "--bytes", str(1 << 30), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"seconds": seconds}
    assert main(["cost", "--op", "toy_copy"]) == 2
    assert capsys.readouterr().err.startswith("error: --bytes: got 'None'")
    assert cost_ops.get("toy_copy") is toy_cost_op.OP


def test_no_toy_is_named_in_the_package() -> None:
    toys = ("toy_serial", "toy_uniform", "toy_ideal", "toy_copy")
    named = [p.name for p in PACKAGE.rglob("*.py") if any(t in p.read_text() for t in toys)]
    assert named == []


def test_entry_points_join_a_fresh_registry_on_first_look_up(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    point = EntryPoint("toy", "toy_schedule:SCHEDULE", schedules.GROUP)
    asked: list[str] = []

    def fake(group: str) -> list[EntryPoint]:
        asked.append(group)
        return [point]

    monkeypatch.setattr(registry, "entry_points", fake)
    fresh: Registry[schedules.PipelineSchedule] = Registry(
        "pipeline schedule", "parallelism.schedule",
        shipped_then_entry_points(lambda: schedules.SHIPPED, schedules.GROUP,
                                  schedules.PipelineSchedule))
    assert asked == []  # nothing is loaded before the first look-up
    assert fresh.get("toy_serial") is toy_schedule.SCHEDULE
    assert fresh.names() == ("gpipe", "1f1b", "interleaved", "toy_serial")
    assert asked == [schedules.GROUP]
