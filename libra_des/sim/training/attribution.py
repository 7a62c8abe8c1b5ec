"""One training step's time and attention straggler split into parts that add up exactly.

What ``result.json``'s ``attribution`` records (:mod:`libra_des.results.attribution` averages
the steps; ``libra-des explain`` subtracts two runs part by part). Every part is a quantity
of the run, not a remainder, and the parts sum to the measured value by construction:

Step time ``T`` is split per GPU (pipeline entity ``e``, stage ``d``) and averaged over GPUs.
A GPU's ``T`` is its busy time plus its idle time; its busy time is its ops' time, which the
op kernel splits per layer into the phases every worker runs (``op_kernel.layer_fields``):

* ``balanced_work``: the linear phases without noise (GEMMs, norms; padding computed where
  the packer pads) plus the attention FLOPs at the *reference* kernel rate: the cost model's
  rate on one causal sequence of the packed length with every query head (our assumption:
  the rate a balancer that never cuts a sequence would get);
* ``kernel_efficiency``: the attention compute as priced (tile sizes, per-document chunk
  shapes) minus the same FLOPs at the reference rate (negative where the run's calls are more
  efficient); the Pipeliner's chunks split compute evenly at no price (their effect is in the
  exposed communication);
* ``intra_pool_imbalance``: the attention phase's lockstep wait for the pool's slowest worker
  (the wait before and after attention comes from noise only: linear work is equal per worker);
* ``comm_exposed``: the attention exchange's exposed seconds (the Pipeliner's), the expert
  all-to-all, and the gradient synchronisation after the last backward (its exposed tail),
  all at the analytic (solo) prices; ``comm_bytes`` (the payload those calls move per GPU) lets
  ``explain`` split a difference into bytes and rate;
* ``contention``: at a fidelity that replays training on the flow network, the seconds the
  ops ran longer than their analytic prices (0 at fast fidelity);
* ``interference``: attention compute slowed beside the exchange, plus at fast fidelity the
  seconds hand-offs added to ops (``overlap.interference: on``);
* ``runtime_noise``: what noise and host gaps added to the work (linear and attention) and
  the lockstep waits they caused in the linear phases;
* ``pipeline_bubble``: the entity's pipeline span minus the GPU's busy time (fill, drain,
  hand-off waits);
* ``inter_pool_imbalance``: the slowest entity's span minus this entity's (the wait at the
  gradient synchronisation for the slowest pool / DP replica);
* ``scheduler``: seconds a balancer's planner outlasts the step (the step lasts as long).

The attention straggler (``attention_straggler_s.mean``: the mean over forward attention calls
of the slowest worker over all entities) splits the same way: per call, the entities' mean
worker time (balanced work, kernel efficiency, noise, interference, exposed exchange), plus
the mean entity's lockstep wait (intra-pool), plus the slowest entity over the mean
(inter-pool), plus at detailed fidelity what the flow network adds (contention).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from libra_des.config import TrainingScenario as Scenario
from libra_des.errors import CheckError
from libra_des.hardware.costs import CostModel
from libra_des.plan.step import StepPlan
from libra_des.sim.training.opcost import LinearCosts, SlotAttention, backward_traffic
from libra_des.sim.training.pipeline import PipelineRun
from libra_des.sim.training.schedules import Schedule
from libra_des.sim.training.stagetimes import DeviceTimes

#: The parts of a step (and of the attention straggler), in the order reports show them.
PARTS = ("balanced_work", "kernel_efficiency", "intra_pool_imbalance", "inter_pool_imbalance",
         "pipeline_bubble", "comm_exposed", "contention", "interference", "runtime_noise",
         "scheduler")


@dataclass(frozen=True)
class StepParts:
    """One step's split: ``step`` seconds per part (summing to the step time), the attention
    straggler's parts summed over its ``calls`` kept forward calls (divide by the calls of
    all steps), and the bytes per GPU the exposed communication moves (per step, and per
    forward call for the straggler)."""

    step: dict[str, float]
    straggler: dict[str, float]
    calls: int
    step_bytes: float
    call_bytes: float


@dataclass(frozen=True)
class StepInputs:
    """What a step's simulation hands over: its op times before and after the network ran
    them (equal at fast fidelity), the timeline, and the run's settings."""

    planned: tuple[DeviceTimes, ...]
    final: tuple[DeviceTimes, ...]
    run: PipelineRun
    step_time: float
    fwd_masks: tuple[np.ndarray, ...]
    replayed: bool  # the flow network replayed the ops (detailed fidelity)


def forward_masks(schedule: Schedule) -> tuple[np.ndarray, ...]:
    """[n] per device: which of its ops are forwards."""
    return tuple(np.array([op.kind == "F" for op in order]) for order in schedule.orders)


def reference_rates(scenario: Scenario, cost: CostModel) -> tuple[float, float]:
    """Seconds per pair-head, forward and backward, of one causal sequence of the packed
    length with every query head (the reference of ``balanced_work``)."""
    m, length = scenario.model, float(scenario.workload.packed_length)
    pairs = length * (length + 1.0) / 2.0
    out = []
    for backward in (False, True):
        s = cost.attention([[pairs]], [[length]], [[m.heads_q]], m.heads_kv, m.head_dim,
                           backward=backward)
        out.append(float(np.asarray(s).ravel()[0]) / (pairs * m.heads_q))
    return out[0], out[1]


def reference_seconds(t: DeviceTimes, is_f: np.ndarray, rates: tuple[float, float],
                      recompute: bool, width: int) -> np.ndarray:
    """[E, n] per-GPU attention seconds of each op's FLOPs at the reference rates."""
    per = np.where(is_f, rates[0], rates[1] + (rates[0] if recompute else 0.0))
    return t.pair_heads * per[None, :] / width


def step_parts(scenario: Scenario, cost: CostModel, plan: StepPlan, lin: LinearCosts,
               att: SlotAttention, step: StepInputs) -> StepParts:
    """The step's split (module docstring); ``plan`` still holds its slots."""
    rates = reference_rates(scenario, cost)
    width = plan.pool_size * scenario.parallelism.cp
    run, t_step = step.run, step.step_time
    e_count, p = run.finish.shape[0], run.finish.shape[1]
    busy = np.nansum(run.finish - run.start, axis=2)  # [E, p]
    span = np.nanmax(run.finish, axis=(1, 2))  # [E]
    t_pipe = float(span.max())
    synced = max(float(run.sync_end.max()), t_pipe)
    parts = dict.fromkeys(PARTS, 0.0)
    beyond = 0.0
    for d, (t, is_f) in enumerate(zip(step.planned, step.fwd_masks, strict=True)):
        ref = reference_seconds(t, is_f, rates, att.recompute, width)
        kernel = t.linear + t.attn_compute + t.attn_exposed + t.pool_wait + t.other_comm
        beyond += float((busy[:, d] - kernel.sum(axis=1)).sum())
        add(parts, "balanced_work", t.linear_clean.sum() + ref.sum())
        add(parts, "kernel_efficiency", (t.attn_clean - ref).sum())
        add(parts, "intra_pool_imbalance", t.attn_wait.sum())
        add(parts, "comm_exposed", (t.attn_exposed + t.other_comm).sum())
        add(parts, "interference", t.interf_compute.sum())
        noise = (t.linear - t.linear_clean) + (t.attn_compute - t.attn_clean - t.interf_compute)
        add(parts, "runtime_noise", (noise + t.pool_wait - t.attn_wait).sum())
        add(parts, "pipeline_bubble", (span - busy[:, d]).sum())
        add(parts, "inter_pool_imbalance", (t_pipe - span).sum())
    add(parts, "contention" if step.replayed else "interference", beyond)
    gpus = e_count * p
    out = {k: v / gpus for k, v in parts.items()}
    out["comm_exposed"] += synced - t_pipe  # the gradient synchronisation's exposed tail
    out["scheduler"] = t_step - synced
    straggler, calls, slowest = straggler_parts(step, rates, att.recompute, width)
    check_sum("step time", out, t_step)
    check_sum("attention straggler", straggler, slowest)
    fwd, total = exchange_bytes(scenario, plan)
    gpu_count = scenario.parallelism.gpus
    step_bytes = (total * scenario.model.layers + other_bytes(scenario, lin, plan)) / gpu_count
    slots = plan.pipelines * plan.microbatches
    return StepParts(out, straggler, calls, step_bytes, fwd / (slots * width))


def add(parts: dict[str, float], key: str, value: float | np.floating) -> None:
    parts[key] += float(value)


def straggler_parts(step: StepInputs, rates: tuple[float, float], recompute: bool, width: int
                    ) -> tuple[dict[str, float], int, float]:
    """The straggler's parts summed over the kept forward calls, how many were kept
    (``results.metrics.window_stragglers``: calls whose slowest worker took any time) and
    the sum of their stragglers (what the parts add up to)."""
    parts = dict.fromkeys(PARTS, 0.0)
    calls, total = 0, 0.0
    for t, f, is_f in zip(step.planned, step.final, step.fwd_masks, strict=True):
        per_entity = f.straggler[:, is_f]  # [E, forward ops, L]
        slowest = per_entity.max(axis=0)
        kept = slowest > 0
        calls += int(kept.sum())
        total += float(slowest[kept].sum())
        mean_e = per_entity.mean(axis=0)
        add(parts, "inter_pool_imbalance", (slowest - mean_e)[kept].sum())
        e_count = per_entity.shape[0]
        ref = float(reference_seconds(t, is_f, rates, recompute, width)[:, is_f].sum()) / e_count
        planned = forward_mean(t.attn_compute + t.attn_exposed + t.attn_wait, is_f)
        add(parts, "balanced_work", ref)
        add(parts, "kernel_efficiency", forward_mean(t.attn_clean, is_f) - ref)
        noise = t.attn_compute - t.attn_clean - t.interf_compute
        add(parts, "runtime_noise", forward_mean(noise, is_f))
        add(parts, "interference", forward_mean(t.interf_compute, is_f))
        add(parts, "comm_exposed", forward_mean(t.attn_exposed, is_f))
        add(parts, "intra_pool_imbalance", forward_mean(t.attn_wait, is_f))
        # The flow network's calls against their analytic prices (0 at fast fidelity).
        add(parts, "contention", float(mean_e[kept].sum()) - planned)
    return parts, calls, total


def forward_mean(per_op: np.ndarray, is_f: np.ndarray) -> float:
    """[E, n] per-op seconds -> their sum over forward ops, mean over entities."""
    return float(per_op[:, is_f].sum()) / len(per_op)


def exchange_bytes(scenario: Scenario, plan: StepPlan) -> tuple[float, float]:
    """Bytes the attention exchange moves in one layer of every slot: the forward's, and the
    forward's plus the backward's (and a full recomputation's), as ``opcost`` prices them."""
    resend, redo_d, redo_r = backward_traffic(scenario.memory)
    fwd = total = 0.0
    if scenario.comm_free:
        return 0.0, 0.0
    for row in plan.slots:
        for p in row:
            disp, ret = float(p.dispatch_bytes.sum()), float(p.return_bytes.sum())
            fwd += disp + ret
            total += disp + ret + (resend * disp + ret) + disp + redo_d * disp + redo_r * ret
    return fwd, total


def other_bytes(scenario: Scenario, lin: LinearCosts, plan: StepPlan) -> float:
    """Payload bytes of the expert all-to-all and the gradient all-reduce over all GPUs."""
    m, par = scenario.model, scenario.parallelism
    if scenario.comm_free:
        return 0.0
    grads = 0.0
    if par.dp * par.cp > 1:
        grads += lin.grad_bytes * m.layers * par.dp * par.cp
    if par.dp > 1:
        grads += lin.expert_grad_bytes * m.layers * par.dp * par.cp
    expert = 0.0
    if m.is_moe and par.cp > 1 and lin.ep_comm_fwd > 0:
        tokens = scenario.workload.packed_length // par.cp
        per_layer = 2.0 * tokens * m.top_k * m.hidden * m.dtype_bytes  # dispatch + combine
        share = 1.0 if lin.token_share is None else float(np.mean(lin.token_share))
        passes = 2.0 + (1.0 if lin.recompute_ep > 0 else 0.0)  # forward, backward, redo
        expert = per_layer * passes * share * plan.microbatches * m.layers * par.dp * par.cp
    return grads + expert


def check_sum(what: str, parts: dict[str, float], total: float) -> None:
    """Built-in check: the parts add up to the measured value (1e-9 of it: rounding only)."""
    got = math.fsum(parts.values())
    if not math.isclose(got, total, rel_tol=1e-9, abs_tol=1e-15):
        raise CheckError(f"the {what}'s parts add up to it",
                         f"parts sum to {got:.9g} s, measured {total:.9g} s")
