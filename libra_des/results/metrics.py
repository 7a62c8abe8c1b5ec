"""Result records: derived metrics of a training run, as the JSON contract of ``result.json``.

Definitions (per step, then averaged over steps unless a key says otherwise):

* ``bubble_fraction``: sum over (entity, stage) of (pipeline span - busy time) over the sum of
  spans; the span is the entity's pipeline makespan, so DP-sync waits (after the span) and pool
  barrier waits (inside busy op time) are excluded.
* ``dp_straggler_fraction``: mean over (entity, stage) of the wait at gradient sync for the
  slowest entity's last backward, over step time.
* ``pool_wait_fraction``: mean per-GPU time waiting for slower workers of its own pool or CP
  group at lockstep points, over step time.
* ``comm_exposed_fraction`` / ``comm_hidden_fraction``: per-GPU communication time on / off the
  critical path (attention exchange, expert all-to-all, gradient sync), over step time.
  Pipeline point-to-point waits count as bubble, not here.
* ``attention_*_s``: per-GPU seconds per step (all layers, forward and backward).
* ``attention_straggler_s``: over every forward attention call of the window (one layer of one
  microbatch slot, run side by side by every replica), the time of its slowest worker across
  all DP replicas and pools.
* ``ecmp`` (with ``network.ecmp_samples`` > 1): step time and exposed communication under
  each ECMP hash sample, with their mean, min, max and standard deviation across samples.
* ``attribution``: the step time and the attention straggler split into parts that add up
  to them (``sim/training/attribution.py``; ``libra-des explain`` compares two runs by them).
* ``events``: the simulation's events over all steps: at fast fidelity one per op and one per
  gradient synchronisation (the timeline's recurrence, ``sim.training.pipeline``); in
  detailed mode the SimPy events processed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from libra_des.config import ModelSpec, scenario_dict
from libra_des.config import TrainingScenario as Scenario
from libra_des.hardware.collectives.tiers import tier_keys
from libra_des.results.attribution import attribution_keys
from libra_des.sim.training.ecmp import spread
from libra_des.sim.training.simulator import StepRecord


def active_params_per_layer(m: ModelSpec) -> float:
    """Weights a token touches in one layer (attention + dense FFN or its top-k experts)."""
    attn = m.hidden * (m.heads_q + 2 * m.heads_kv) * m.head_dim + m.heads_q * m.head_dim * m.hidden
    if m.is_moe:
        assert m.expert_ffn is not None
        ffn = (m.top_k + m.shared_experts) * 3 * m.hidden * m.expert_ffn + m.hidden * m.experts
    else:
        assert m.ffn is not None
        ffn = 3 * m.hidden * m.ffn
    return float(attn + ffn)


def step_flops(scenario: Scenario, rec: StepRecord) -> float:
    """Model FLOPs of one step: 6 N T for the weights plus 12 d pair-heads for attention."""
    m = scenario.model
    tokens = rec.plan.tokens  # padding is not work
    # Core-attention microbenchmarks run no projections or FFN, so they count no weight FLOPs.
    weights = 0.0 if scenario.attention_only else active_params_per_layer(m)
    linear = 6.0 * weights * m.layers * tokens
    attention = 12.0 * m.head_dim * rec.plan.planned_pair_heads * m.layers
    return linear + attention


def executed_attention_flops(scenario: Scenario, rec: StepRecord) -> float:
    """Attention FLOPs of the ops that ran (forward 4 d, backward 8 d per pair-head)."""
    fwd, bwd = rec.executed_pair_heads
    return 4.0 * scenario.model.head_dim * (fwd + 2.0 * bwd)


def per_gpu(arrs: tuple[np.ndarray, ...]) -> float:
    """Mean over (entity, stage) of a per-op quantity summed over the stage's ops."""
    return float(np.mean([a.sum(axis=1).mean() for a in arrs]))


def step_metrics(scenario: Scenario, rec: StepRecord) -> dict[str, float]:
    """The per-step quantities that the result averages."""
    run, t = rec.run, rec.step_time
    busy = np.stack([d.duration.sum(axis=1) for d in rec.times], axis=1)  # [E, p]
    span = np.nanmax(run.finish, axis=(1, 2))[:, None] * np.ones_like(busy)
    last = np.nanmax(run.finish, axis=2)  # [E, p]
    exposed = per_gpu(tuple(d.attn_exposed + d.other_comm for d in rec.times))
    hidden = per_gpu(tuple(d.attn_hidden for d in rec.times))
    return {
        "step_time": t,
        "bubble": float((span - busy).sum() / span.sum()),
        "dp_straggler": float((last.max(axis=0) - last).mean() / t),
        "pool_wait": per_gpu(tuple(d.pool_wait for d in rec.times)) / t,
        "comm_exposed": (exposed + float(run.sync_exposed.mean())) / t,
        "comm_hidden": (hidden + float(run.sync_hidden.mean())) / t,
        "attn_compute": per_gpu(tuple(d.attn_compute for d in rec.times)),
        "attn_exposed": per_gpu(tuple(d.attn_exposed for d in rec.times)),
        "attn_hidden": hidden,
        "inter_pool": rec.plan.inter_pool_imbalance,
        "intra_pool": rec.plan.intra_pool_imbalance,
        "flops": step_flops(scenario, rec),
        "attn_flops": executed_attention_flops(scenario, rec),
    }


def window_stragglers(per_entity: np.ndarray) -> np.ndarray:
    """Slowest worker of each forward attention call across the whole DP width.

    ``per_entity[e, op, layer]`` is entity ``e``'s call time (its slowest worker). Every entity
    runs the same (op, layer) call of the window side by side, so the call's straggler is the
    max over entities: for Ulysses the heaviest replica, for Libra the heaviest pool.
    """
    calls = per_entity.max(axis=0)
    result: np.ndarray = calls[calls > 0]
    return result


def microbatch_forward(rec: StepRecord, fwd_mask: np.ndarray) -> list[float]:
    """Forward op durations on the first stage, entity-major, in schedule order."""
    return [float(x) for x in rec.times[0].duration[:, fwd_mask].ravel()]


def memory_keys(records: list[StepRecord]) -> dict[str, Any]:
    """``peak_memory_gib`` per stage, ``oom``, the breakdown (see
    ``sim/training/memory.py``) and the
    TAP knobs chosen when ``auto`` (``tap_autotune``: choice and ranking, or null)."""
    report = records[0].memory
    if report is None:
        return {"tap_autotune": records[0].tap_autotune}
    detail = report.as_dict()
    return {"peak_memory_gib": detail["peak_memory_gib"], "oom": detail["oom"], "memory": detail,
            "tap_autotune": records[0].tap_autotune}


def interference_keys(records: list[StepRecord], stages: int) -> dict[str, Any]:
    """``interference`` (only with ``overlap.interference: on``): per-GPU mean seconds per
    step that overlapped compute ran slower (``compute_slowdown_s``) and overlapped
    collectives ran slower (``collective_slowdown_s``), in all and per overlap point."""
    ledgers = [r.interference for r in records if r.interference is not None]
    if not ledgers:
        return {}
    n = len(ledgers) * max(stages, 1)
    points = sorted({k for led in ledgers for k in led.by_point})
    return {"interference": {
        "compute_slowdown_s": sum(led.compute_s for led in ledgers) / n,
        "collective_slowdown_s": sum(led.comm_s for led in ledgers) / n,
        "by_point_s": {k: sum(led.by_point.get(k, 0.0) for led in ledgers) / n for k in points},
    }}


def training_result(
    scenario: Scenario,
    records: list[StepRecord],
    fwd_masks: list[np.ndarray],
    peak_flops: float,
) -> dict[str, Any]:
    """Assemble ``result.json`` (minus ``wall_s``, which the caller adds)."""
    steps = [step_metrics(scenario, r) for r in records]
    times = np.array([s["step_time"] for s in steps])

    def mean(key: str) -> float:
        return float(np.mean([s[key] for s in steps]))

    stragglers = np.concatenate(
        [window_stragglers(r.times[d].straggler[:, m]) for r in records
         for d, m in enumerate(fwd_masks)]
    )
    gpus = scenario.parallelism.gpus
    tokens = float(np.mean([r.plan.tokens for r in records]))
    padded = scenario.parallelism.gbs * scenario.workload.packed_length
    return {
        "kind": "training",
        "policy": scenario.balancer.policy,
        "gpus": gpus,
        "step_time_s": {
            "mean": float(times.mean()),
            "p50": float(np.percentile(times, 50)),
            "p99": float(np.percentile(times, 99)),
            "per_step": [float(x) for x in times],
        },
        "tokens_per_s": tokens / float(times.mean()),
        "padded_tokens_per_s": padded / float(times.mean()),
        "mfu": mean("flops") / (float(times.mean()) * gpus * peak_flops),
        "bubble_fraction": mean("bubble"),
        "dp_straggler_fraction": mean("dp_straggler"),
        "pool_wait_fraction": mean("pool_wait"),
        "comm_exposed_fraction": mean("comm_exposed"),
        "comm_hidden_fraction": mean("comm_hidden"),
        "attention_imbalance": {"inter_pool": mean("inter_pool"), "intra_pool": mean("intra_pool")},
        "attention_straggler_s": {
            "mean": float(stragglers.mean()) if stragglers.size else 0.0,
            "max": float(stragglers.max()) if stragglers.size else 0.0,
        },
        "attention_compute_s": mean("attn_compute"),
        "attention_comm_exposed_s": mean("attn_exposed"),
        "attention_comm_hidden_s": mean("attn_hidden"),
        "microbatch_forward_s": [x for r in records for x in microbatch_forward(r, fwd_masks[0])],
        "pipeline_p2p_s": float(records[0].p2p_seconds.max()),
        "changes_step_samples": any(r.plan.changes_step_samples for r in records),
        "tiles_per_step": records[0].plan.tiles,
        "attention_flops_per_step": mean("attn_flops"),
        "events": int(sum(r.run.events for r in records)),
        **tier_keys(dict(records[-1].comm_tiers), dict(records[-1].comm_choices),
                    records[-1].fabric_layout),
        **({"warnings": list(records[-1].warnings)} if records[-1].warnings else {}),
        **({"notes": list(records[-1].notes)} if records[-1].notes else {}),
        "checks": {
            "flops_executed_equal_planned": True,
            "bytes_sent_equal_received": True,
            "every_tile_ran_once": True,
            "linear_flops_equal_tokens": True,
        },
        **memory_keys(records),
        **interference_keys(records, scenario.parallelism.pp),
        **attribution_keys([r.parts for r in records]),
        **ecmp_keys(scenario, records),
        "scenario": scenario_dict(scenario),
    }


def ecmp_keys(scenario: Scenario, records: list[StepRecord]) -> dict[str, Any]:
    """``ecmp``: the step under ``network.ecmp_samples`` hashes (sample 0 is the run; see
    ``sim/training/ecmp.py``), each sample's step time and exposed communication averaged
    over the steps, and their mean, min, max and standard deviation across samples; absent
    with one sample."""
    if not records[0].ecmp:
        return {}
    per = [[r, *r.ecmp] for r in records]  # [step][sample]
    metrics = [[step_metrics(scenario, rec) for rec in step] for step in per]

    def samples(key: str) -> list[float]:
        return [float(np.mean([m[k][key] for m in metrics])) for k in range(len(per[0]))]

    step_s, exposed = samples("step_time"), samples("comm_exposed")
    net = scenario.network
    return {"ecmp": {
        "routing": net.routing, "seed": net.ecmp_seed, "samples": len(per[0]),
        "method": "exact" if all(r.ecmp_exact for r in records) else "light replay",
        "step_time_s": spread(step_s),
        "comm_exposed_fraction": spread(exposed),
        "comm_exposed_s": spread([e * t for e, t in zip(exposed, step_s, strict=True)]),
        "per_sample_step_time_s": step_s,
    }}

