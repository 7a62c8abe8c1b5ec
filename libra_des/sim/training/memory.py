"""Peak memory of every pipeline stage of a training scenario, checked before simulation.

Per GPU of stage ``d`` (the arithmetic and its sources are in
:mod:`libra_des.hardware.compute.memory`):

* model states of the layers the stage holds (all its virtual stages), plus the embedding on
  the first stage and the LM head on the last;
* the **stash**: activations of every forward whose backward has not run yet. Walking the
  stage's op order (GPipe, 1F1B or interleaved) and adding a chunk's layers at each ``F`` and
  removing them at each ``B`` gives the most layer-microbatches held at once (1F1B: ``p - d``
  microbatches, GPipe: all ``m``), times the bytes of one layer of one microbatch;
* **remote buffers** (``memory.keep_remote_kv``): per layer and held microbatch, what a worker
  received before attention (fetched K/V groups, remote Q) and the outputs O it computed for
  other workers (Ulysses: only its head-split O, see ``AttentionPlan.held_remote_bytes``),
  taken from the step's plans (the largest worker of any slot). When not kept they are freed
  after the forward and only the Pipeliner's working set, ``min(3, M) / M`` of one layer's
  buffers (chunk k-1 returning, k computing, k+1 arriving), is transient;
* the **transient** peak: one layer's full activations (backward or recompute workspace),
  plus that Pipeliner working set, or on the last stage the logits of one microbatch,
  whichever is larger.

Tokens per GPU are the real tokens of the largest CP shard of any packed sequence (WLB-LLM's
microbatches may hold more or fewer than ``L``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from libra_des.config import TrainingScenario as Scenario
from libra_des.errors import InputError
from libra_des.hardware.compute import memory as mem
from libra_des.hardware.gpu_records import gpu_record
from libra_des.plan.step import StepPlan
from libra_des.sim.training.schedules import Schedule
from libra_des.sim.training.stagetimes import Layout
from libra_des.workload.packing import PackedBatch


@dataclass(frozen=True)
class StageMemory:
    """Peak bytes of one GPU of pipeline stage ``stage``, by part."""

    stage: int
    weights: float
    gradients: float
    optimizer: float
    activations: float
    remote_buffers: float
    transient: float
    held_layer_microbatches: int

    @property
    def total(self) -> float:
        return (
            self.weights + self.gradients + self.optimizer
            + self.activations + self.remote_buffers + self.transient
        )

    def as_dict(self) -> dict[str, Any]:
        gib = {
            k: getattr(self, k) / mem.GIB
            for k in ("weights", "gradients", "optimizer", "activations", "remote_buffers",
                      "transient")
        }
        return {"stage": self.stage, "peak_memory_gib": self.total / mem.GIB,
                "held_layer_microbatches": self.held_layer_microbatches, "breakdown_gib": gib}


@dataclass(frozen=True)
class MemoryReport:
    """Every stage's peak against the device's usable HBM (``hbm_tier``, ``hbm_ref``: the
    GPU record's tier and source for the HBM size)."""

    stages: tuple[StageMemory, ...]
    gpu: str
    hbm_bytes: float
    usable_bytes: float
    hbm_tier: str
    hbm_ref: str

    @property
    def worst(self) -> StageMemory:
        return max(self.stages, key=lambda s: s.total)

    @property
    def oom(self) -> bool:
        return self.worst.total > self.usable_bytes

    def as_dict(self) -> dict[str, Any]:
        return {
            "peak_memory_gib": [s.total / mem.GIB for s in self.stages],
            "per_stage": [s.as_dict() for s in self.stages],
            "capacity_gib": self.usable_bytes / mem.GIB,
            "hbm_gib": self.hbm_bytes / mem.GIB,
            "hbm_source": f"{self.gpu} {self.hbm_tier} HBM: {self.hbm_ref}",
            "oom": self.oom,
        }


def held_layers(schedule: Schedule, device: int, layout: Layout) -> int:
    """Most layer-microbatches of activations device ``device`` holds at once."""
    held, peak = 0, 0
    for op in schedule.orders[device]:
        n = layout.layers_of(schedule, device, op.chunk)
        if op.kind == "F":
            held += n
            peak = max(peak, held)
        else:
            held -= n
    return peak


def shard_tokens_of(window: PackedBatch, cp: int) -> float:
    """Real tokens of the largest CP shard of any packed sequence of a window."""
    t = window.tokens()
    shard = -(-window.packed_length // cp)
    return float(np.maximum(np.minimum(t, shard), -(-t // cp)).max(initial=0))


def shard_tokens(plans: list[StepPlan], cp: int) -> float:
    """Real tokens of the largest CP shard of any packed sequence of the steps."""
    return max(shard_tokens_of(plan.window, cp) for plan in plans)


@dataclass(frozen=True)
class PlanFootprint:
    """What the memory model takes from the step plans."""

    tokens: float  # real tokens of the largest CP shard of any packed sequence
    remote: float  # largest worker's held remote attention buffers of one layer
    chunks: int  # the Pipeliner's M


def footprint(plans: list[StepPlan], cp: int) -> PlanFootprint:
    attn = [p for plan in plans for row in plan.slots for p in row]
    return PlanFootprint(
        shard_tokens(plans, cp),
        max(p.held_remote_bytes for p in attn),
        max(p.chunks for p in attn),
    )


def stage_memory(
    scenario: Scenario, schedule: Schedule, layout: Layout, plans: PlanFootprint, gpu: str
) -> MemoryReport:
    """Peak memory of every stage for the scenario's memory policy."""
    m, par, pol = scenario.model, scenario.parallelism, scenario.memory
    only = scenario.attention_only
    tokens, remote, chunks = plans.tokens, plans.remote, plans.chunks
    per_layer_act = tokens * mem.stashed_per_token(m, pol.recompute, only)
    working = tokens * mem.layer_working_per_token(m, only)
    working += 0.0 if pol.keep_remote_kv else remote * min(3, chunks) / chunks
    lp = mem.layer_params(m, ep=par.cp, tp=par.tp)
    fact = gpu_record(gpu).hbm_bytes
    hbm = fact.value
    stages = []
    for d in range(par.pp):
        layers = sum(layout.layers_of(schedule, d, c) for c in range(schedule.virtual))
        rep, exp = lp.replicated * layers, lp.experts * layers
        ends = (d == 0) + (d == par.pp - 1)
        rep += ends * mem.embedding_params(m, par.tp)
        states = (mem.state_bytes(0.0, 0.0, 1, 1) if only else
                  mem.state_bytes(rep, exp, par.dp * par.cp, par.dp, pol.distributed_optimizer))
        held = held_layers(schedule, d, layout)
        logits = 0.0 if only or d != par.pp - 1 else mem.logits_bytes(m, tokens)
        stages.append(StageMemory(
            stage=d,
            weights=states.weights,
            gradients=states.gradients,
            optimizer=states.optimizer,
            activations=held * per_layer_act,
            remote_buffers=held * remote if pol.keep_remote_kv else 0.0,
            transient=max(working, logits),
            held_layer_microbatches=held,
        ))
    return MemoryReport(tuple(stages), gpu, hbm, hbm * pol.usable_fraction, fact.tier,
                        fact.source)


def check_memory(scenario: Scenario, report: MemoryReport) -> None:
    """Refuse a run that does not fit (exit 2, one line) unless ``memory.check: warn``."""
    if not report.oom or scenario.memory.check == "warn":
        return
    worst, pol = report.worst, scenario.memory
    hints = [h for h, used in (("memory.recompute=full", pol.recompute == "full"),
                               ("memory.keep_remote_kv=false", not pol.keep_remote_kv))
             if not used]
    hints += ["more CP or PP", "memory.check=warn"]
    raise InputError(
        "memory.recompute",
        pol.recompute,
        f"a setting that fits: stage {worst.stage} needs {worst.total / mem.GIB:.1f} GiB per GPU "
        f"> {report.usable_bytes / mem.GIB:.1f} GiB usable ({pol.usable_fraction:g} x "
        f"{report.hbm_bytes / 1e9:.0f} GB {report.gpu} HBM, {report.hbm_tier}); "
        f"try {', '.join(hints)}",
    )


def check_memory_floor(
    scenario: Scenario, window: PackedBatch, gpu: str, schedule: Schedule | None = None
) -> None:
    """Refuse (exit 2, one line) a run whose memory without any remote attention buffers
    already exceeds ``gpu``'s HBM on the first GBS ``window``: a floor every plan of the run
    needs, so it is checked when the scenario is elaborated, before any work (``schedule``:
    the run's, when it is built already)."""
    from libra_des.plan.step import pool_size_of
    from libra_des.sim.training.schedules import build_schedule

    par = scenario.parallelism
    if schedule is None:
        schedule = build_schedule(par.schedule, par.pp, par.microbatches, par.virtual_stages)
    layout = Layout(par.dp, par.cp, pool_size_of(scenario), scenario.model.layers)
    need = PlanFootprint(shard_tokens_of(window, par.cp), 0.0, 1)
    check_memory(scenario, stage_memory(scenario, schedule, layout, need, gpu))
