"""WLB-LLM as its code runs (``wlb_llm``) and its idealised upper bound (``wlb_llm_ideal``).

``wlb_llm``: the code's two-pass greedy packs every document of the step into the step's
``gbs`` microbatches (one per DP replica and microbatch slot) under the fixed-breakpoint
workload, then each microbatch runs WLB-LLM's CP attention, per-document or per-sequence by
the paper's adaptive rule (``libra_des.plan.wlb_llm``; docs/model.md A).
``wlb_llm_ideal``: the former model, kept unchanged as an upper bound: the FLOP-cost greedy
(``plan.baselines.wlb_llm_pack``), then Ulysses' perfectly balanced head split.
Both run their linear layers on the real tokens, one pipeline per replica.

Knobs of their ``balancer:`` sections (bad input under any other policy):
``wlb_defer_outliers`` (both; off in the paper comparison, as the Libra paper ran it) holds
long documents back in the outlier queue; ``wlb_cp_sharding`` (``wlb_llm`` only) is
``adaptive`` (the paper's rule), ``per_document`` (as DistCA's run of it drives it) or
``per_sequence``.
"""

from __future__ import annotations

import numpy as np

from libra_des.config import TrainingBalancerSpec
from libra_des.config import TrainingScenario as Scenario
from libra_des.plan.balancers.balancer import TrainingBalancer
from libra_des.plan.balancers.planners import ulysses_heads, ulysses_real
from libra_des.plan.baselines import (
    held_outliers,
    slotted_batch,
    wlb_cost_coefficients,
    wlb_llm_pack,
)
from libra_des.plan.types import AttentionPlan
from libra_des.plan.wlb_llm import Sharding, pack_bins, wlb_attention_plan
from libra_des.workload.packing import PackedBatch, cut_pieces


class WlbLlmIdealBalancerSpec(TrainingBalancerSpec):
    """``wlb_defer_outliers`` holds samples longer than the outlier threshold back to a later
    step, as WLB-LLM's outlier queue does (docs/model.md A)."""

    wlb_defer_outliers: bool = False


class WlbLlmBalancerSpec(WlbLlmIdealBalancerSpec):
    """Adds ``wlb_cp_sharding``: how a CP group cuts its microbatch's documents."""

    wlb_cp_sharding: Sharding = "adaptive"


def raw_samples(window: PackedBatch) -> np.ndarray:
    """The window's pieces joined back into the samples they were cut from."""
    starts = np.flatnonzero(np.r_[True, np.diff(window.sample_ids) != 0])
    return np.add.reduceat(window.lengths, starts)


def repack_ideal(
    scenario: Scenario, window: PackedBatch, queue: np.ndarray
) -> tuple[PackedBatch, bool, np.ndarray]:
    """Pack the window's samples by the FLOP-cost greedy (the idealised model)."""
    result = wlb_llm_pack(
        raw_samples(window),
        window.packed_length,
        scenario.parallelism.gbs,
        defer_outliers=defers_outliers(scenario.balancer),
        queue=queue if queue.size else None,
        coefficients=wlb_cost_coefficients(scenario.model, scenario.attention_only),
    )
    changed = bool(result.changes_step_samples)
    return result.batch, changed, np.asarray(result.deferred, dtype=np.int64)


def repack(
    scenario: Scenario, window: PackedBatch, queue: np.ndarray
) -> tuple[PackedBatch, bool, np.ndarray]:
    """Pack the window's samples as WLB-LLM's code does (``plan.wlb_llm.pack_bins``): every
    microbatch's cap is L (the code's ``Lmax``, the step's tokens per bin); the outlier queue
    (L/2 threshold) only when ``wlb_defer_outliers`` is on."""
    cap, d = window.packed_length, scenario.parallelism.gbs
    pieces, ids = cut_pieces(np.concatenate([queue, raw_samples(window)]), cap)
    held = (held_outliers(pieces, d, cap // 2) if defers_outliers(scenario.balancer)
            else np.zeros(pieces.size, dtype=bool))
    slot = np.full(pieces.size, -1, dtype=np.int64)
    slot[~held] = pack_bins(pieces[~held], cap, d)
    batch, _ = slotted_batch(pieces, ids, slot, d, cap)
    return batch, bool(held.any() or queue.size), pieces[held]


def sharded(scenario: Scenario, seqs: list[np.ndarray]) -> AttentionPlan:
    """WLB-LLM's CP attention over the slot's one microbatch."""
    bal = scenario.balancer
    rule = bal.wlb_cp_sharding if isinstance(bal, WlbLlmBalancerSpec) else "adaptive"
    return wlb_attention_plan(seqs[0], cp=scenario.parallelism.cp, model=scenario.model,
                              rule=rule)


def defers_outliers(bal: TrainingBalancerSpec) -> bool:
    """The knob of a section validated by a WLB-LLM spec (off otherwise)."""
    return isinstance(bal, WlbLlmIdealBalancerSpec) and bal.wlb_defer_outliers


BALANCER = TrainingBalancer(
    name="wlb_llm", pool="replica", attention=sharded, real_token_linear=True,
    packer=repack, config=WlbLlmBalancerSpec,
)

IDEAL = TrainingBalancer(
    name="wlb_llm_ideal", pool="replica", attention=ulysses_real, real_token_linear=True,
    packer=repack_ideal, config=WlbLlmIdealBalancerSpec, check=ulysses_heads,
)
