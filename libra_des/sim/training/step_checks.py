"""Built-in conservation checks of one simulated training step (exit 3 on failure): every
tile ran once, the FLOPs executed equal the FLOPs planned (attention pair-heads and linear
tokens, forward and backward), and the bytes sent equal the bytes received.

Each is taken from the same per-op arrays that set the durations, times how often each op
ran, so a wrong slot index, layer count or skipped op shows up against the plan.
"""

from __future__ import annotations

import numpy as np

from libra_des.config import TrainingScenario as Scenario
from libra_des.errors import CheckError
from libra_des.plan.step import StepPlan, balancer_of
from libra_des.sim.training.pipeline import PipelineRun
from libra_des.sim.training.schedules import Schedule
from libra_des.sim.training.stagetimes import DeviceTimes


def slot_tokens(scenario: Scenario, plan: StepPlan) -> np.ndarray:
    """[E, m] tokens the linear layers of each slot run on.

    WLB-LLM's variable-length microbatches hold their real tokens; the fixed-length packers
    pad every packed sequence to L and compute the padding too.
    """
    if balancer_of(scenario).real_token_linear:
        result: np.ndarray = plan.window.tokens()[plan.seq_of].sum(axis=-1).astype(float)
        return result
    full = float(plan.pool_size * scenario.workload.packed_length)
    return np.full(plan.seq_of.shape[:2], full)


def check_linear_tokens(
    scenario: Scenario,
    plan: StepPlan,
    times: tuple[DeviceTimes, ...],
    run: PipelineRun,
    schedule: Schedule,
) -> None:
    """Built-in check: linear work executed = the slots' tokens x layers, both directions.

    Taken from the per-op arrays that set the durations (share x layers) times how often each
    op ran; for WLB-LLM the expected tokens are its real tokens (per-token FLOPs x tokens).
    """
    width = float(plan.pool_size * scenario.workload.packed_length)
    expected = float(slot_tokens(scenario, plan).sum()) * scenario.model.layers
    done = {"F": 0.0, "B": 0.0}
    for d, t in enumerate(times):
        ran = run.ran[:, d, :] * t.linear_share * width
        for i, op in enumerate(schedule.orders[d]):
            done[op.kind] += float(ran[:, i].sum())
    for kind, tokens in done.items():
        if not np.isclose(tokens, expected, rtol=1e-9):
            raise CheckError(
                "linear FLOPs executed equal tokens x per-token FLOPs",
                f"{kind}: executed {tokens:.6g} token-layers, expected {expected:.6g}",
            )


def executed_pair_heads(
    times: tuple[DeviceTimes, ...], run: PipelineRun, schedule: Schedule
) -> tuple[float, float]:
    """Pair-heads of attention the executed ops were costed for, forward and backward.

    Taken from the same per-op arrays that set the durations, times how often each op ran,
    so a wrong slot index, layer count or skipped op shows up against the plan.
    """
    out = {"F": 0.0, "B": 0.0}
    for d, t in enumerate(times):
        ran = run.ran[:, d, :] * t.pair_heads
        for i, op in enumerate(schedule.orders[d]):
            out[op.kind] += float(ran[:, i].sum())
    return out["F"], out["B"]


def check_step(
    scenario: Scenario,
    plan: StepPlan,
    schedule: Schedule,
    run: PipelineRun,
    executed: tuple[float, float],
) -> None:
    """Built-in checks: FLOPs executed = planned, bytes sent = received, each op ran once."""
    counts = run.counters.executed
    expected = plan.pipelines * schedule.stages * schedule.virtual * plan.microbatches * 2
    if len(counts) != expected or any(v != 1 for v in counts.values()) or np.any(run.ran != 1):
        raise CheckError(
            "every tile ran exactly once",
            f"{len(counts)} of {expected} (pipeline, stage, microbatch, pass) slots ran, "
            f"op run counts {int(run.ran.min())}..{int(run.ran.max())}",
        )

    # Planned: the window's exact causal pairs x heads, for every layer, forward and backward.
    planned = plan.planned_pair_heads * scenario.model.layers
    for kind, done in zip(("forward", "backward"), executed, strict=True):
        if not np.isclose(done, planned, rtol=1e-9):
            raise CheckError(
                "FLOPs executed equal FLOPs planned",
                f"{kind}: executed {done:.6g} pair-heads, planned {planned:.6g}",
            )
    c = run.counters
    if not np.isclose(c.p2p_sent, c.p2p_received, rtol=1e-12):
        raise CheckError("bytes sent equal bytes received", f"{c.p2p_sent} != {c.p2p_received}")
