"""WLB-LLM: its own variable-length packing of whole samples (outliers may be deferred), then
Ulysses per replica on the real tokens; linear layers run on the real tokens too.

Its ``balancer:`` section adds one knob to the shared ones, ``wlb_defer_outliers`` (no other
balancer reads it, so naming it under another policy is bad input)."""

from __future__ import annotations

import numpy as np

from libra_des.config import TrainingBalancerSpec
from libra_des.config import TrainingScenario as Scenario
from libra_des.plan.balancers.planners import ulysses_real
from libra_des.plan.balancers.registry import TrainingBalancer
from libra_des.plan.baselines import wlb_cost_coefficients, wlb_llm_pack
from libra_des.workload.packing import PackedBatch


class WlbLlmBalancerSpec(TrainingBalancerSpec):
    """WLB-LLM's section: ``wlb_defer_outliers`` holds samples longer than the outlier
    threshold back to a later step, as WLB-LLM's outlier queue does (docs/model.md A)."""

    wlb_defer_outliers: bool = False


def repack(
    scenario: Scenario, window: PackedBatch, queue: np.ndarray
) -> tuple[PackedBatch, bool, np.ndarray]:
    """Re-join the window's pieces into raw samples and pack them WLB-LLM's way."""
    starts = np.flatnonzero(np.r_[True, np.diff(window.sample_ids) != 0])
    raw = np.add.reduceat(window.lengths, starts)
    result = wlb_llm_pack(
        raw,
        window.packed_length,
        scenario.parallelism.gbs,
        defer_outliers=defers_outliers(scenario.balancer),
        queue=queue if queue.size else None,
        coefficients=wlb_cost_coefficients(scenario.model, scenario.attention_only),
    )
    changed = bool(result.changes_step_samples)
    return result.batch, changed, np.asarray(result.deferred, dtype=np.int64)


def defers_outliers(bal: TrainingBalancerSpec) -> bool:
    """The knob of a section validated by :class:`WlbLlmBalancerSpec` (off otherwise)."""
    return isinstance(bal, WlbLlmBalancerSpec) and bal.wlb_defer_outliers


BALANCER = TrainingBalancer(
    name="wlb_llm", pool="replica", attention=ulysses_real, real_token_linear=True,
    packer=repack, config=WlbLlmBalancerSpec,
)
