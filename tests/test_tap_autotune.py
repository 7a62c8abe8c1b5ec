"""`auto` TAP knobs: the ranking, the run's choice, `plan --tap`, and WLB-LLM's real tokens."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from libra_des.cli import main
from libra_des.config import ROOT, load_scenario
from libra_des.errors import CheckError
from libra_des.hardware.costs import CostModel
from libra_des.hardware.fabric.topology import load_topology
from libra_des.hardware.profiles.profile import load_profile
from libra_des.kinds.simulation import simulate
from libra_des.sim.training.tap_autotune import PoolSetting, grid, rank

MICRO = str(ROOT / "scenarios" / "paper-attention-microbench-256k.yaml")
SMALL = ["parallelism.dp=2", "parallelism.cp=2", "parallelism.gbs=4", "balancer.pool_size=2",
         "model.layers=2", "workload.packed_length=65536", "steps=1",
         "topology_params.nodes=2"]  # DP groups one per node (until the layout fix lands)


def test_grid_respects_chunks_and_shard() -> None:
    sc = load_scenario(MICRO)
    cands = grid(sc.model, chunks=4, shard_tokens=20_000)
    assert {h for h, _ in cands} == {1, 2, 4, 8}  # heads_q 32: 32/H must be a multiple of 4
    assert {b for _, b in cands} == {4096, 8192, 16384}


def test_ranking_is_sorted_and_memory_first() -> None:
    sc = load_scenario(MICRO, SMALL)
    cost = CostModel(load_profile(None), load_topology("h200-roce-railopt", {}).fabric())
    rng = np.random.default_rng(0)
    pools = [[rng.integers(1, 8000, 8), rng.integers(1, 8000, 8)]]
    setting = PoolSetting(2, sc.model, 65536, 0.03, 4, "libra")
    todo = [(1, 4096), (4, 4096), (8, 16384)]
    r = rank(pools, setting, cost, todo)
    times = [c.predicted_s for c in r.candidates]
    assert times == sorted(times)
    assert all(c.predicted_s >= c.compute_s > 0 for c in r.candidates)
    # A memory limit that only the smallest remote buffers meet moves that candidate first.
    least = min(c.remote_bytes for c in r.candidates)
    r2 = rank(pools, setting, cost, todo, fits=lambda b: b <= least)
    assert r2.best.remote_bytes == least and r2.best.fits
    assert [c.fits for c in r2.candidates].index(False) >= 1


def result(extra: list[str]) -> dict[str, Any]:
    res, _ = simulate(load_scenario(MICRO, [*SMALL, *extra]))
    return res


def test_run_records_the_choice_and_plan_prints_it(capsys: pytest.CaptureFixture[str]) -> None:
    res = result([])
    tuned = res["tap_autotune"]
    assert tuned["heads_split"] == tuned["ranking"][0]["heads_split"]
    assert tuned["block_size"] == tuned["ranking"][0]["block_size"]
    assert main(["plan", "--scenario", MICRO, "--tap", "--json",
                 *[a for s in SMALL for a in ("--set", s)]]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == tuned
    fixed = result(["balancer.heads_split=2", "balancer.block_size=8192"])
    assert fixed["tap_autotune"] is None


def test_rank_tap_is_the_runs_choice_and_refuses_non_tap_policies() -> None:
    from libra_des.api.planning import rank_tap
    from libra_des.errors import InputError

    ranked = rank_tap(MICRO, SMALL)
    tuned = result([])["tap_autotune"]
    assert ranked.ranking.as_dict() == tuned and ranked.scenario
    fitting = [c.predicted_s for c in ranked.ranking.candidates if c.fits]
    assert ranked.ranking.best.fits and ranked.ranking.best.predicted_s == min(fitting)
    with pytest.raises(InputError, match=r"balancer\.policy"):
        rank_tap(MICRO, [*SMALL, "balancer.policy=ulysses"])


def test_wlb_llm_linear_work_follows_real_tokens() -> None:
    quick = str(ROOT / "scenarios" / "quickstart.yaml")
    extra = ["workload=longctx-256k", "parallelism.pp=1", "model.layers=2", "memory.check=warn",
             "variance.enabled=false", *SMALL[:4], "topology_params.nodes=2"]
    wlb, _ = simulate(load_scenario(quick, [*extra, "balancer.policy=wlb_llm"]))
    assert wlb["checks"]["linear_flops_equal_tokens"] is True
    assert wlb["tokens_per_s"] <= wlb["padded_tokens_per_s"]


def test_linear_token_check_catches_a_wrong_share(monkeypatch: pytest.MonkeyPatch) -> None:
    from libra_des.sim.training import simulator as training

    real = training.token_share

    def doubled(scenario: Any, plan: Any) -> Any:
        share = real(scenario, plan)
        return None if share is None else share * 1.5

    monkeypatch.setattr(training, "token_share", doubled)
    quick = str(ROOT / "scenarios" / "quickstart.yaml")
    sc = load_scenario(quick, ["workload=longctx-256k", "parallelism.pp=1", "model.layers=2",
                               "memory.check=warn", *SMALL[:4], "topology_params.nodes=2",
                               "balancer.policy=wlb_llm"])
    with pytest.raises(CheckError, match="linear FLOPs"):
        simulate(sc)


@pytest.mark.parametrize("value", ["true", "1.5", "0", "-8", "foo"])
def test_bad_tap_knobs_are_one_line_errors(value: str) -> None:
    from libra_des.errors import InputError

    for field in ("heads_split", "block_size"):
        # Strict typing may answer first (booleans, fractions): still one line naming the field.
        with pytest.raises(InputError, match=rf"^error: balancer\.{field}: got .*; allowed: "
                                             r"[^\n]+$"):
            load_scenario(MICRO, [f"balancer.{field}={value}"])
