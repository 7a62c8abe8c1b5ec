"""The baselines as they run: one hand-checked small case per baseline's running costs.

WLB-LLM's outlier delay is fixed in tests/test_baselines.py (hand-checked queue release).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from libra_des.commands.run import simulate
from libra_des.config import ROOT, ModelSpec, Scenario, load_scenario
from libra_des.plan.balancers import distca
from libra_des.plan.baselines import ulysses_plan

SMALL = ["topology=h200-roce-railopt", "parallelism.dp=4", "parallelism.cp=2",
         "parallelism.pp=1", "parallelism.gbs=8", "steps=1", "model.layers=2",
         "variance.enabled=false", "workload=longctx-256k", "balancer.policy=distca"]


def scenario(extra: list[str]) -> Scenario:
    return load_scenario(ROOT / "scenarios" / "quickstart.yaml", [*SMALL, *extra])


def captured_step(monkeypatch: pytest.MonkeyPatch, sc: Scenario) -> dict[str, Any]:
    """Run ``sc`` and keep the first step's cluster, plan, slot costs and record."""
    import libra_des.sim.training.simulator as training

    seen: dict[str, Any] = {}
    real_step, real_att = training.simulate_step, training.slot_attention

    def step(*args: Any, **kwargs: Any) -> Any:
        record = real_step(*args, **kwargs)
        seen.setdefault("cluster", args[1])
        seen.setdefault("record", record)
        return record

    def att(*args: Any, **kwargs: Any) -> Any:
        out = real_att(*args, **kwargs)
        seen.setdefault("att", out)
        return out

    monkeypatch.setattr(training, "simulate_step", step)
    monkeypatch.setattr(training, "slot_attention", att)
    seen["result"], _ = simulate(sc)
    return seen


def test_ulysses_keeps_its_head_parallel_all_to_all_hand_checked() -> None:
    """cp 2, 4 query heads, 2 KV heads, head_dim 8, 2-byte values, 8 padded tokens.

    A rank holds 4 tokens; it sends its peer Q of the peer's 2 query heads (4 x 2 x 16 B =
    128) and K, V of the peer's one KV head (2 x 4 x 1 x 16 B = 128): 256 B each way;
    O comes back for 2 heads: 128 B. Every rank keeps all the work of its own heads.
    """
    model = ModelSpec(name="t", layers=1, hidden=32, heads_q=4, heads_kv=2, head_dim=8,
                      ffn=64, vocab=16)
    plan = ulysses_plan(np.array([5, 3]), cp=2, model=model, packed_length=8)
    assert plan.dispatch_bytes.tolist() == [[0.0, 256.0], [256.0, 0.0]]
    assert plan.return_bytes.tolist() == [[0.0, 128.0], [128.0, 0.0]]
    assert plan.worker_heads.tolist() == [2, 2]
    assert plan.worker_pairs[0] == plan.worker_pairs[1]


def test_distca_pays_its_slowest_server_and_all_to_all_dispatch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Free overlap: the hand-check is of the slowest server, not of what overlap takes.
    seen = captured_step(monkeypatch, scenario(["comm_free=false", "overlap.interference=off"]))
    times, att, cost = seen["record"].times[0], seen["att"], seen["cluster"].cost
    plan = seen["record"].plan
    # One pool of all 4 replicas x cp 2 = 8 servers; the op waits for the slowest of them.
    assert plan.pool_size == 4 and att.compute_fwd.shape[-1] == 8
    # PP 1: op 0 is microbatch 0's forward; noise off, so its slowest worker is the plan's.
    assert times.compute_max[0, 0, 0] == pytest.approx(
        float(att.compute_fwd[0, 0].max()), rel=1e-12)
    assert att.compute_fwd[0, 0].max() > att.compute_fwd[0, 0].mean()
    # Its dispatch is the all-to-all(v) model over the plan's per-pair bytes, per chunk.
    slot = plan.slots[0][0]
    gpn = int(cost.fabric.gpus_per_node)
    expected = float(cost.all_to_allv(slot.dispatch_bytes / slot.chunks, gpus_per_node=gpn))
    assert att.dispatch_fwd[0, 0] == pytest.approx(expected, rel=1e-9)


def test_distca_scheduler_cpu_counts_tiles_times_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    import libra_des.sim.training.simulator as training

    sc = scenario([])
    seen = captured_step(monkeypatch, sc)
    plan = seen["record"].plan
    ops = plan.tiles * 8  # every tile scans the pool's 8 servers once
    assert distca.scheduler_ops(plan.tiles, 8) == ops
    assert training.scheduler_seconds(sc, plan) == pytest.approx(ops * distca.OP_SECONDS)
    # Hidden behind the step at the sourced cost; a scheduler slower than the step sets it.
    assert training.scheduler_seconds(sc, plan) < seen["record"].step_time
    real = training.balancer_of
    monkeypatch.setattr(training, "balancer_of", lambda s: dataclasses.replace(
        real(s), scheduler_op_seconds=1.0))
    slow = captured_step(monkeypatch, sc)
    assert slow["record"].step_time == pytest.approx(float(ops))
