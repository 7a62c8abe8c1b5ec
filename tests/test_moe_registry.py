"""MoE systems are looked up in a registry: a new system is one registered module."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
import toy_moe_system

import libra_des
from libra_des.config import load_scenario
from libra_des.errors import InputError
from libra_des.plan.moe import registry
from libra_des.plan.moe.registry import BUILTIN, ENTRY_POINT_GROUP, moe_system, moe_system_names
from libra_des.runs.sweep import Axis, SweepSpec, resolve
from libra_des.sim.moe.batch import Wiring
from tests.test_scenarios import MOE_POLICIES

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


SHIPPED = [*sorted(BREAKDOWN.parent.glob("moe-*.yaml")), BREAKDOWN]


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
@pytest.mark.parametrize("name", BUILTIN)
def test_no_scenario_predictor_leaks_into_another_system(path: Path, name: str) -> None:
    sc = load_scenario(path, [f"balancer.policy={name}"])
    assert sc.balancer.override_predictor is None  # shipped scenarios compare systems as shipped
    wiring = Wiring.of(sc)
    assert wiring.predictor == moe_system(name).capabilities.predictor
    assert wiring.predictor_label == wiring.predictor


def test_lina_reports_its_own_path_table_unless_overridden() -> None:
    qwen = BREAKDOWN.parent / "moe-qwen3-235b.yaml"
    small = ["model.layers=3", "workload.batches=1", "variance.enabled=false"]
    own = libra_des.simulate(qwen, [*small, "balancer.policy=lina"], seed=0)
    forced = libra_des.simulate(
        qwen, [*small, "balancer.policy=lina", "balancer.override_predictor=lookahead"], seed=0)
    assert own["predictor"] == "lina"
    assert forced["predictor"] == "lookahead (override)"
    # The path table misses far more often than the lookahead gate (docs/model.md B).
    assert own["predictor_accuracy"] < 0.7 < 0.8 < forced["predictor_accuracy"]


@pytest.mark.parametrize("name", ["sglang", "eplb", "harmoeny"])
def test_an_override_a_system_cannot_use_is_bad_input(name: str) -> None:
    sc = load_scenario(BREAKDOWN, [*SMALL, f"balancer.policy={name}",
                                   "balancer.override_predictor=lookahead"])
    with pytest.raises(InputError) as err:
        Wiring.of(sc)
    assert err.value.line().startswith("error: balancer.override_predictor: got 'lookahead'")


def test_cli_refuses_an_unusable_override_and_a_too_wide_ep(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from libra_des.cli import main

    for extra in (["balancer.policy=sglang", "balancer.override_predictor=oracle"],
                  ["parallelism.ep=256", "model.experts=128"]):
        args = ["run", str(BREAKDOWN), "--out", "/nonexistent/never-written"]
        for item in [*SMALL, *extra]:
            args += ["--set", item]
        assert main(args) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and ("override_predictor" in err[0] or "parallelism.ep" in err[0])
