"""The MoE prefill scenario kind: batches through one expert-parallel group (docs/model.md B)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from libra_des.config import MoeScenario, scenario_dict
from libra_des.kinds.kind import ScenarioKind
from libra_des.kinds.preflight import moe_estimate, moe_trace_ranks
from libra_des.results.numbers import show, with_unit
from libra_des.results.plausibility import check_moe, check_numbers

if TYPE_CHECKING:
    from libra_des.hardware.profiles.profile import Profile

#: Headline metrics of an MoE prefill result, as dotted paths into ``result.json``.
METRICS = (
    "moe_layer_s",
    "prefill_tokens_per_s",
    "ttft_s.mean",
    "imbalance_ratio.mean",
    "replica_waste_fraction",
)


def simulate(
    scenario: MoeScenario,
    profile: Profile,
    rng: np.random.Generator,
    t0: float,
    progress: bool,
    want_trace: bool,
    _trace_ranks: list[int] | None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Every batch of the scenario; the result of :mod:`libra_des.results.moe_metrics`, checked."""
    from libra_des.results.moe_metrics import simulate_moe

    timeline: list[Any] | None = [] if want_trace else None
    result = simulate_moe(scenario, rng, progress=progress, timeline=timeline, profile=profile)
    result["scenario"] = scenario_dict(scenario)
    result["wall_s"] = time.perf_counter() - t0
    check_numbers(result)
    check_moe(result, scenario, float(profile.peak_flops("bf16")))
    return result, trace_of(scenario, timeline)


def trace_of(scenario: MoeScenario, timeline: list[Any] | None) -> dict[str, Any] | None:
    """The MoE prefill trace (stages per GPU per layer), when one was asked for."""
    if timeline is None:
        return None
    from libra_des.results.trace_moe import moe_trace

    gpus = 1 + max((t[3] for t in timeline if t[3] is not None), default=0)
    return moe_trace(timeline, scenario, gpus)


def summary(r: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The ``libra-des run`` table of an MoE prefill result."""
    keys = ("moe_layer_s", "prefill_tokens_per_s", "replica_waste_fraction", "events")
    rows = [(k, show(r[k], k)) for k in keys if isinstance(r.get(k), int | float)]
    if isinstance(r.get("imbalance_ratio"), dict):
        rows.append(("imbalance_ratio.mean", with_unit(r["imbalance_ratio"]["mean"])))
    return rows


def elaborate(scenario: MoeScenario) -> MoeScenario:
    """Bad input before any work: the MoE system and the network model must be registered (the
    config layer, below the registries, cannot see them), an override predictor usable by the
    system, a grouped-GEMM kernel for the model's dtype, EP no wider than the experts, and the
    knobs against the machine (:func:`~libra_des.kinds.machine.check_machine`)."""
    from libra_des.kinds.machine import check_machine
    from libra_des.sim.moe.batch import Wiring
    from libra_des.sim.moe.setup import check_ep_width, system_kernel
    from libra_des.sim.network import models as network_models

    network_models.get(scenario.fidelity)
    check_ep_width(scenario)
    system_kernel(scenario.balancer.policy, scenario.model.dtype)  # one for model.dtype
    Wiring.of(scenario)  # looks the system up; refuses an override it cannot use
    check_machine(scenario)
    return scenario


KIND = ScenarioKind(
    name="moe_inference",
    model=MoeScenario,
    simulate=simulate,
    metrics=METRICS,
    summary=summary,
    estimate=moe_estimate,
    trace_ranks=moe_trace_ranks,
    elaborate=elaborate,
)
