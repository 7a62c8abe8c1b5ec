"""Scenario kinds: one model per kind with only its own knobs, and one registry of behaviour.

Reads the shipped scenarios and the golden results; simulates nothing (a few seconds).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import pytest

from libra_des import api, kinds
from libra_des.config import (
    ROOT,
    SCENARIO_KINDS,
    MoeScenario,
    ScenarioBase,
    TrainingBalancerSpec,
    TrainingScenario,
    load_scenario,
    read_yaml,
)
from libra_des.errors import InputError
from libra_des.plan.balancers import registry as training_balancers
from libra_des.report.figures import DRAWINGS

SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
GOLDEN = Path(__file__).resolve().parent / "golden"


def test_registry_config_and_figures_agree() -> None:
    assert kinds.names() == tuple(SCENARIO_KINDS)
    for name in kinds.names():
        kind = kinds.get(name)
        assert kind.model is SCENARIO_KINDS[name]
        assert kind.model.model_fields["kind"].default == name
    assert set(DRAWINGS) == set(kinds.names())


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_shipped_scenario_loads_into_its_kind(path: Path) -> None:
    sc = load_scenario(path)
    assert type(sc) is SCENARIO_KINDS[read_yaml(path).get("kind", "training")]
    assert kinds.kind_of(sc).model is type(sc)


def model_in(annotation: Any) -> Any:
    """The pydantic model an annotation holds (``X | None``, ``SerializeAsAny[X]``), or None."""
    for candidate in (annotation, *get_args(annotation)):
        if hasattr(candidate, "model_fields"):
            return candidate
    return None


def section_keys(model: type[ScenarioBase]) -> set[str]:
    """Dotted keys of the model's top level and of its section models (one level down)."""
    keys = set()
    for name, info in model.model_fields.items():
        keys.add(name)
        inner = model_in(info.annotation)
        keys |= {f"{name}.{sub}" for sub in (inner.model_fields if inner else ())}
    return keys


def default_of(model: type[ScenarioBase], key: str) -> Any:
    """The JSON form of the default value of a dotted key of ``model``."""
    *sections, last = key.split(".")
    node: Any = model
    for part in sections:
        node = model_in(node.model_fields[part].annotation)
    value = node.model_fields[last].get_default(call_default_factory=True)
    return value.model_dump(mode="json") if hasattr(value, "model_dump") else value


def other_kind_keys(own: type[ScenarioBase], other: type[ScenarioBase]) -> list[str]:
    """Keys only the other kind has, whose section this kind has too or that are top-level."""
    mine = section_keys(own)
    return sorted(k for k in section_keys(other) - mine
                  if "." not in k or k.split(".")[0] in mine)


CASES = [
    *[("quickstart.yaml", k) for k in other_kind_keys(TrainingScenario, MoeScenario)],
    *[("moe-glm45.yaml", k) for k in other_kind_keys(MoeScenario, TrainingScenario)],
]


def test_each_kind_has_keys_the_other_lacks() -> None:
    train = {k for s, k in CASES if s == "quickstart.yaml"}
    moe = {k for s, k in CASES if s == "moe-glm45.yaml"}
    assert {"balancer.slots", "parallelism.ep", "workload.batches"} <= train
    assert {"steps", "memory", "balancer.pool_size", "parallelism.dp",
            "workload.packed_length"} <= moe


@pytest.mark.parametrize(("scenario", "key"), CASES)
def test_a_key_of_the_other_kind_is_bad_input(scenario: str, key: str) -> None:
    """Even at the other kind's default value: the key is not this kind's."""
    other = "moe_inference" if scenario == "quickstart.yaml" else "training"
    value = json.dumps(default_of(SCENARIO_KINDS[other], key))
    with pytest.raises(InputError) as err:
        api.load_scenario(ROOT / "scenarios" / scenario, [f"{key}={value}"])
    assert err.value.field == key
    assert f"only kind={other} reads it" in err.value.allowed


def test_an_unknown_kind_names_the_kinds() -> None:
    with pytest.raises(InputError) as err:
        load_scenario(ROOT / "scenarios" / "quickstart.yaml", ["kind=inference"])
    assert err.value.field == "kind" and err.value.allowed == "training | moe_inference"


def test_a_training_only_command_refuses_an_moe_scenario() -> None:
    from libra_des.api import step_plan

    with pytest.raises(InputError) as err:
        step_plan(ROOT / "scenarios" / "moe-glm45.yaml")
    assert err.value.field == "kind" and err.value.allowed.startswith("training (")


def golden(kind: str) -> list[dict[str, Any]]:
    found = [json.loads(p.read_text()) for p in sorted(GOLDEN.glob("*.json"))]
    return [r | {"wall_s": 1.0} for r in found if r["kind"] == kind]


@pytest.mark.parametrize("name", ["training", "moe_inference"])
def test_metrics_and_summary_read_the_kinds_results(name: str) -> None:
    """Every declared headline metric is a number in each golden result of the kind."""
    from libra_des.runs.sweep import headline

    kind = kinds.get(name)
    results = golden(name)
    assert results
    for result in results:
        assert kinds.of_result(result) is kind
        assert set(headline(result)) == set(kind.metrics)
        rows = kind.summary(result)
        assert rows and all(isinstance(k, str) and isinstance(v, str) for k, v in rows)


class WithKnob(TrainingBalancerSpec):
    """A balancer config that reads one knob of its own."""

    lookahead_windows: int = 2


def test_a_balancer_validates_its_section_with_its_own_model(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The training kind's elaborate (through the API) validates the section with the
    policy's own model; the config layer below the registry only keeps the unknown key."""
    own = {"ulysses": WithKnob}
    monkeypatch.setattr(training_balancers, "config_of", own.get)
    base = ROOT / "scenarios" / "quickstart.yaml"
    sc = api.load_scenario(base, ["balancer.policy=ulysses", "balancer.lookahead_windows=5"])
    assert isinstance(sc, TrainingScenario) and isinstance(sc.balancer, WithKnob)
    assert sc.balancer.lookahead_windows == 5
    assert sc.model_dump()["balancer"]["lookahead_windows"] == 5  # result files show it
    with pytest.raises(InputError) as err:  # libra reads the shared model: no such knob
        api.load_scenario(base, ["balancer.lookahead_windows=5"])
    assert err.value.field == "balancer.lookahead_windows"
    with pytest.raises(InputError) as err:
        api.load_scenario(base, ["balancer.policy=ulysses", "balancer.lookahead_windows=0.5"])
    assert err.value.field == "balancer.lookahead_windows"


def test_wlb_llm_reads_its_own_knob_and_no_other_balancer_does() -> None:
    base = ROOT / "scenarios" / "quickstart.yaml"
    sc = api.load_scenario(base, ["balancer.policy=wlb_llm", "balancer.wlb_defer_outliers=true"])
    assert sc.model_dump()["balancer"]["wlb_defer_outliers"] is True
    for policy in ("libra", "ulysses", "distca"):
        with pytest.raises(InputError) as err:
            api.load_scenario(base, [f"balancer.policy={policy}",
                                     "balancer.wlb_defer_outliers=false"])
        assert err.value.field == "balancer.wlb_defer_outliers"
        assert "only wlb_llm | wlb_llm_ideal reads it" in err.value.allowed


def test_a_scenario_object_changes_balancer_through_the_api() -> None:
    """Re-scoping an object keeps what it set, not the defaults of its balancer's own model."""
    from libra_des.api import load_scenario as api_load

    base = ROOT / "scenarios" / "quickstart.yaml"
    wlb = api_load(base, ["balancer.policy=wlb_llm"])
    libra = api_load(wlb, {"balancer.policy": "libra", "seed": 3})
    assert libra == api_load(base, {"seed": 3})
    deferring = api_load(wlb, {"balancer.wlb_defer_outliers": True})
    with pytest.raises(InputError) as err:
        api_load(deferring, {"balancer.policy": "libra"})
    assert err.value.field == "balancer.wlb_defer_outliers"
