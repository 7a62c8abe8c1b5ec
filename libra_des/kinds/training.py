"""The training scenario kind: long-context training steps (docs/model.md A)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from libra_des.config import TrainingBalancerSpec, TrainingScenario, key_kinds, validate
from libra_des.errors import InputError
from libra_des.kinds.kind import ScenarioKind
from libra_des.kinds.preflight import training_estimate, training_trace_ranks
from libra_des.plan.balancers import registry as training_balancers
from libra_des.results.numbers import show, sig3, with_unit
from libra_des.results.plausibility import check_numbers, check_training

if TYPE_CHECKING:
    from libra_des.hardware.profiles.profile import Profile
    from libra_des.sim.training.simulator import PreparedRun

#: Headline metrics of a training result, as dotted paths into ``result.json``.
METRICS = (
    "tokens_per_s",
    "step_time_s.mean",
    "mfu",
    "bubble_fraction",
    "dp_straggler_fraction",
    "comm_exposed_fraction",
    "attention_straggler_s.mean",
    "attention_straggler_s.max",
)


def simulate(
    scenario: TrainingScenario,
    profile: Profile,
    rng: np.random.Generator,
    t0: float,
    progress: bool,
    want_trace: bool,
    trace_ranks: list[int] | None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Every step of the (elaborated) scenario; the result of
    :mod:`libra_des.results.metrics`, checked. The profile, the pipeline schedule and the
    memory report are the run's own (each made once), not made again for the result."""
    from libra_des.results.metrics import step_flops, training_result
    from libra_des.results.trace import chrome_trace
    from libra_des.sim.training.simulator import prepare_training, run_steps

    # Every check of the run (memory, plans, the fabric's algorithms) before a progress bar
    # starts: a refused run prints its one line and nothing else. The memory floor was
    # checked when the scenario was elaborated (:func:`elaborate`).
    prepared = prepare_training(scenario, rng, profile, floor_checked=True)
    records = with_progress(prepared) if progress else run_steps(prepared)
    schedule = prepared.schedule
    masks = [np.array([op.kind == "F" for op in order]) for order in schedule.orders]
    peak = float(profile.peak_flops("bf16"))  # dense bf16 peak FLOP/s of the device
    result = training_result(scenario, records, masks, peak)
    result["wall_s"] = time.perf_counter() - t0
    flops = float(np.mean([step_flops(scenario, r) for r in records]))
    check_numbers(result)
    check_training(result, flops, peak)
    trace = chrome_trace(records, schedule, trace_ranks, scenario) if want_trace else None
    return result, trace


def with_progress(prepared: PreparedRun) -> list[Any]:
    """Every step under a progress bar on stderr (a terminal only: rich disables it on a
    pipe): steps, and inside each step the share of ops done with the simulated clock, so a
    long detailed step shows how far it is and when it should end (rich's ETA)."""
    # Imported only when shown: rich.progress adds to every run's start-up otherwise
    # (figure in benchmarks/README.md).
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from libra_des.sim.training.simulator import run_steps

    scenario = prepared.scenario
    columns = (TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(),
               TextColumn("simulated {task.fields[now]:.4g} s"), TimeElapsedColumn(),
               TextColumn("ETA"), TimeRemainingColumn())
    with Progress(*columns, transient=True, console=Console(stderr=True)) as bar:
        task = bar.add_task(f"simulating {scenario.steps} step(s)", total=scenario.steps, now=0.0)
        done = [0]

        def step_done(step: int) -> None:
            done[0] = step + 1
            bar.update(task, completed=done[0])

        def within(now: float, share: float) -> None:
            bar.update(task, completed=done[0] + share, now=now)

        return run_steps(prepared, step_done, within)


def summary(r: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The ``libra-des run`` table of a training result."""
    return [
        ("policy", str(r["policy"])),
        ("GPUs", str(r["gpus"])),
        ("step time (mean)", show(r["step_time_s"]["mean"], "step_time_s.mean")),
        ("tokens/s", show(r["tokens_per_s"], "tokens_per_s")),
        ("MFU", show(r["mfu"], "mfu")),
        ("bubble fraction", show(r["bubble_fraction"], "bubble_fraction")),
        ("DP straggler fraction", show(r["dp_straggler_fraction"], "dp_straggler_fraction")),
        ("pool wait fraction", show(r["pool_wait_fraction"], "pool_wait_fraction")),
        ("comm exposed / hidden", f"{show(r['comm_exposed_fraction'], 'comm_exposed_fraction')}"
                                  f" / {show(r['comm_hidden_fraction'], 'comm_hidden_fraction')}"),
        ("attention imbalance inter / intra",
         f"{with_unit(r['attention_imbalance']['inter_pool'])} / "
         f"{with_unit(r['attention_imbalance']['intra_pool'])}"),
        ("attention straggler (mean / max)",
         f"{show(r['attention_straggler_s']['mean'], 'attention_straggler_s')} / "
         f"{show(r['attention_straggler_s']['max'], 'attention_straggler_s')}"),
        ("peak memory (GiB per stage)", memory_text(r)),
        ("TAP (H, B)", tap_text(r)),
        *ecmp_rows(r),
        ("events", str(r["events"])),
        ("wall", with_unit(r["wall_s"], "s")),
        *(("warning", str(w)) for w in r.get("warnings", [])),
    ]


def ecmp_rows(r: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The ECMP ensemble's spread (``network.ecmp_samples`` > 1), one row each."""
    ens = r.get("ecmp")
    if not ens:
        return []
    head = f"ECMP {ens['samples']} samples ({ens['method']})"
    rows = []
    for key, label in (("step_time_s", "step time"), ("comm_exposed_fraction",
                                                          "comm exposed")):
        s = ens[key]
        rows.append((f"{head}: {label} mean (min..max) std",
                     f"{show(s['mean'], key)} ({show(s['min'], key)}..{show(s['max'], key)}) "
                     f"{show(s['std'], key)}"))
    return rows


def memory_text(r: Mapping[str, Any]) -> str:
    peaks = r.get("peak_memory_gib") or []
    text = " / ".join(sig3(x) for x in peaks)
    return f"{text} (OOM)" if r.get("oom") else text


def tap_text(r: Mapping[str, Any]) -> str:
    tuned = r.get("tap_autotune")
    if tuned:
        return f"{tuned['heads_split']}, {tuned['block_size']} (auto)"
    if r.get("policy") not in training_balancers.tap_users():
        return "unused (no TAP)"
    bal = r.get("scenario", {}).get("balancer", {})
    return f"{bal.get('heads_split')}, {bal.get('block_size')}"


def key_balancers(dotted: str) -> list[str]:
    """The training balancers whose own config model has the ``balancer.*`` key."""
    section, _, name = dotted.partition(".")
    if section != "balancer":
        return []
    return [b for b in training_balancers.names()
            if name in getattr(training_balancers.config_of(b), "model_fields", {})]


def resolve_balancer(scenario: TrainingScenario) -> TrainingScenario:
    """The scenario with its ``balancer`` section validated by the policy's own config model
    (the shared one unless the balancer declares one), the policy registered and its pool
    rule met: what the config layer, below the registry, leaves to this kind."""
    bal = scenario.balancer
    own = training_balancers.config_of(bal.policy)
    if own is not None or bal.model_extra:
        # Only the keys the scenario set: a default of the own model stays a default.
        data = bal.model_dump(exclude_unset=True)
        resolved = validate(own or TrainingBalancerSpec, data, "balancer.", "training",
                            key_balancers, key_kinds)
        if own is not None:
            scenario = scenario.model_copy(update={"balancer": resolved})
    policies = training_balancers.names()
    if bal.policy not in policies:
        raise InputError("balancer.policy", bal.policy, " | ".join(policies))
    dp = scenario.parallelism.dp
    balancer = training_balancers.get(bal.policy)
    if balancer.pool == "configured" and dp % bal.pool_size:
        raise InputError("balancer.pool_size", bal.pool_size, f"a divisor of dp={dp}")
    if balancer.check is not None:
        balancer.check(scenario)  # what its planner would refuse mid-run
    return scenario


def elaborate(scenario: TrainingScenario) -> TrainingScenario:
    """The names the config layer cannot see: the balancer (its name, pool rule and own
    config model, :func:`resolve_balancer`), the pipeline schedule (and the model chunks it
    takes), the network model, the length law (with the fields it needs) and the knobs
    against the machine (:func:`~libra_des.kinds.machine.check_machine`), and the memory floor
    on the first window (what the run would refuse first, before its progress bar)."""
    from libra_des.kinds.machine import check_machine
    from libra_des.sim.network import models as network_models
    from libra_des.sim.training import first_look, schedules
    from libra_des.sim.training.memory import check_memory_floor
    from libra_des.workload import lengths
    from libra_des.workload.packing import make_stream

    scenario = resolve_balancer(scenario)
    par = scenario.parallelism
    schedules.get(par.schedule).check(par.virtual_stages)
    fidelity = network_models.get(scenario.fidelity)
    if scenario.network.ecmp_samples > 1 and not fidelity.replays_training:
        raise InputError("network.ecmp_samples", scenario.network.ecmp_samples,
                         f"1 with fidelity {scenario.fidelity} (it hashes no flows; an ECMP "
                         "ensemble needs a flow-level fidelity such as detailed)")
    lengths.check(scenario.workload.lengths)
    topo = check_machine(scenario)
    if scenario.memory.check != "warn":
        # The run's data stream (the middle of the seed's three children), its first window.
        _hardware, data_rng, _noise = np.random.default_rng(scenario.seed).spawn(3)
        stream = make_stream(scenario.workload, data_rng)
        check_memory_floor(scenario, stream.peek_window(scenario.parallelism.gbs),
                           topo.spec.gpu)
        first_look.keep(scenario, stream)  # the run plans from this window, not a redraw
    return scenario


KIND = ScenarioKind(
    name="training",
    model=TrainingScenario,
    simulate=simulate,
    metrics=METRICS,
    summary=summary,
    estimate=training_estimate,
    trace_ranks=training_trace_ranks,
    elaborate=elaborate,
)
