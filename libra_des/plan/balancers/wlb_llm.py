"""WLB-LLM: its own variable-length packing of whole samples (outliers may be deferred), then
Ulysses per replica on the real tokens; linear layers run on the real tokens too."""

from __future__ import annotations

import numpy as np

from libra_des.config import TrainingScenario as Scenario
from libra_des.plan.balancers.planners import ulysses_real
from libra_des.plan.baselines import wlb_cost_coefficients, wlb_llm_pack
from libra_des.training_balancers import TrainingBalancer
from libra_des.workload.packing import PackedBatch


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
        defer_outliers=scenario.balancer.wlb_defer_outliers,
        queue=queue if queue.size else None,
        coefficients=wlb_cost_coefficients(scenario.model),
    )
    changed = bool(result.changes_step_samples)
    return result.batch, changed, np.asarray(result.deferred, dtype=np.int64)


BALANCER = TrainingBalancer(
    name="wlb_llm", pool="replica", attention=ulysses_real, real_token_linear=True,
    packer=repack,
)
