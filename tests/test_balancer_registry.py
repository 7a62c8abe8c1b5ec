"""Training balancers are looked up in a registry: a new one needs no edit to the package."""

from __future__ import annotations

import pytest
import toy_balancer

import libra_des
from libra_des.config import ROOT
from libra_des.errors import InputError
from libra_des.plan.balancers import registry as training_balancers
from tests.test_scenarios import TRAINING_POLICIES

QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"
#: A small layout (64 GPUs, as in test_api) with a short model and two steps.
SMALL = [
    "parallelism.dp=8", "parallelism.cp=4", "parallelism.pp=2", "parallelism.gbs=32",
    "balancer.pool_size=4", "workload=longctx-256k", "model.layers=4", "steps=2",
]


def test_shipped_balancers_registered_in_order() -> None:
    assert training_balancers.names()[: len(TRAINING_POLICIES)] == TRAINING_POLICIES
    libra = training_balancers.get("libra")
    assert (libra.pool, libra.vrsp, libra.runs_tap) == ("configured", True, True)
    assert training_balancers.get("wlb_llm").packer is not None


def test_unknown_balancer_lists_the_registered_ones() -> None:
    with pytest.raises(InputError) as err:
        libra_des.load_scenario(QUICKSTART, ["balancer.policy=nope"])
    assert "toy_real" in str(err.value) and "libra" in str(err.value)


def test_registering_a_name_twice_is_refused() -> None:
    clash = training_balancers.TrainingBalancer(
        name="libra", pool="replica", attention=toy_balancer.real_tokens)
    with pytest.raises(ValueError, match="twice"):
        training_balancers.register(clash)


def test_toy_balancer_runs_through_simulate() -> None:
    """The toy moves real tokens where Ulysses moves padded ones: same compute, less traffic."""
    toy = libra_des.step_plan(QUICKSTART, [*SMALL, "balancer.policy=toy_real"])
    uly = libra_des.step_plan(QUICKSTART, [*SMALL, "balancer.policy=ulysses"])
    assert toy.policy == "toy_real" and toy.pool_size == 1
    toy_bytes = sum(float(p.dispatch_bytes.sum()) for row in toy.slots for p in row)
    uly_bytes = sum(float(p.dispatch_bytes.sum()) for row in uly.slots for p in row)
    assert toy.planned_pair_heads == uly.planned_pair_heads
    assert 0 < toy_bytes < uly_bytes
    res = libra_des.simulate(QUICKSTART, [*SMALL, "balancer.policy=toy_real"])
    assert res["kind"] == "training"
    assert res.to_dict()["scenario"]["balancer"]["policy"] == "toy_real"


def test_entry_points_are_loaded_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    """A third-party entry point naming a TrainingBalancer joins a fresh registry on look-up."""
    from importlib.metadata import EntryPoint

    point = EntryPoint(name="toy", value="toy_balancer:BALANCER", group=training_balancers.GROUP)
    asked: list[str] = []

    def fake(group: str) -> list[EntryPoint]:
        asked.append(group)
        return [point]

    monkeypatch.setattr(training_balancers, "entry_points", fake)
    fresh = training_balancers.Registry(
        "training balancer", "balancer.policy", training_balancers.load_balancers
    )
    assert asked == []
    assert fresh.get("toy_real") is toy_balancer.BALANCER
    assert asked == [training_balancers.GROUP]
    assert fresh.names()[-1] == "toy_real" and "libra" in fresh.names()
