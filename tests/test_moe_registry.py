"""MoE systems are looked up in a registry: a new system is one registered module."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
import toy_moe_system

import libra_des
from libra_des.config import MOE_POLICIES, load_scenario
from libra_des.errors import InputError
from libra_des.plan.moe import registry
from libra_des.plan.moe.registry import BUILTIN, ENTRY_POINT_GROUP, moe_system, moe_system_names
from libra_des.runs.sweep import Axis, SweepSpec, resolve
from libra_des.sim.moe.batch import Wiring

BREAKDOWN = Path(__file__).resolve().parents[1] / "scenarios" / "paper-moe-breakdown.yaml"
SMALL = ["model.layers=3", "workload.batches=1", "workload.batch=8", "variance.enabled=false"]


def test_shipped_systems_come_first_and_config_lists_them() -> None:
    assert moe_system_names()[: len(BUILTIN)] == BUILTIN == MOE_POLICIES
    assert "toy" in moe_system_names()
    assert ENTRY_POINT_GROUP == "libra_des.moe_systems"


@pytest.mark.parametrize("name", moe_system_names())
def test_flow_follows_the_declared_capabilities(name: str) -> None:
    caps = moe_system(name).capabilities
    wiring = Wiring.of(load_scenario(BREAKDOWN, [*SMALL, f"balancer.policy={name}"]))
    assert (wiring.prefetch, wiring.fetch, wiring.cpu_plan, wiring.two_stage) == (
        caps.prefetch, caps.fetch, caps.cpu_plan, caps.two_stage)
    assert wiring.predictor == caps.predictor
    assert wiring.allgather == (caps.dispatch == "allgather")


def test_unknown_system_is_bad_input_listing_the_registry() -> None:
    with pytest.raises(InputError) as err:
        moe_system("magic")
    assert "toy" in err.value.line() and "sglang" in err.value.line()


def test_toy_system_runs_through_the_library_api() -> None:
    toy = libra_des.simulate(BREAKDOWN, [*SMALL, "balancer.policy=toy"], seed=1)
    sglang = libra_des.simulate(BREAKDOWN, [*SMALL, "balancer.policy=sglang"], seed=1)
    assert toy["policy"] == toy_moe_system.SYSTEM.name
    # Same placement as SGLang, so the same imbalance; its declared CPU plan adds a stage
    # that SGLang never runs, so a layer takes longer.
    assert toy["imbalance_ratio"]["mean"] == pytest.approx(sglang["imbalance_ratio"]["mean"])
    assert toy["layer_breakdown_s"]["sharding_cpu"]["exposed"] > 0.0
    assert sglang["layer_breakdown_s"].get("sharding_cpu", {}).get("exposed", 0.0) == 0.0
    assert toy["moe_layer_s"] > sglang["moe_layer_s"]


def test_entry_points_are_loaded_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    point = EntryPoint("toy", "toy_moe_system:SYSTEM", ENTRY_POINT_GROUP)
    asked: list[str] = []

    def fake(group: str) -> list[EntryPoint]:
        asked.append(group)
        return [point]

    monkeypatch.setattr(registry, "entry_points", fake)
    fresh = registry.Registry("MoE system", "balancer.policy", registry.load_systems,
                              replace=True)
    assert asked == []  # nothing is loaded before the first look-up
    assert fresh.get("toy") is toy_moe_system.SYSTEM
    assert fresh.names()[: len(BUILTIN)] == BUILTIN
    assert asked == [ENTRY_POINT_GROUP]


def test_a_sweep_rejects_an_unregistered_system_before_any_point() -> None:
    axis = Axis(("balancer.policy",), (("toy",), ("magic",)))
    with pytest.raises(InputError) as err:
        resolve(SweepSpec(str(BREAKDOWN), tuple(SMALL), (axis,)))
    assert err.value.line().startswith("error: balancer.policy: got 'magic'")
    good = Axis(("balancer.policy",), (("toy",), ("sglang",)))
    assert len(resolve(SweepSpec(str(BREAKDOWN), tuple(SMALL), (good,)))) == 2
