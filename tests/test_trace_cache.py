"""Routing traces shared through the on-disk cache: same results, one file per content."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from libra_des.config import RoutingSpec, load_scenario
from libra_des.results.moe_metrics import simulate_moe
from libra_des.sim.moe.simulator import WALL_CLOCK_FIELDS
from libra_des.workload import trace_cache
from libra_des.workload.routing import RouterModel, generate_trace

REPO = Path(__file__).resolve().parents[1]
SMALL = ["model.layers=3", "workload.batches=2", "workload.batch=4", "variance.enabled=false"]


def run(*sets: str, seed: int = 0) -> dict[str, Any]:
    scenario = load_scenario(REPO / "scenarios" / "paper-moe-breakdown.yaml", [*SMALL, *sets])
    result = simulate_moe(scenario, np.random.default_rng(seed))
    return {k: v for k, v in result.items() if k not in WALL_CLOCK_FIELDS}


@pytest.mark.parametrize("policy", ["eplb", "libra"])
def test_cached_traces_give_identical_results(
    policy: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(trace_cache.ENV, raising=False)
    plain = run(f"balancer.policy={policy}")
    monkeypatch.setenv(trace_cache.ENV, str(tmp_path))
    first = run(f"balancer.policy={policy}")  # miss: generates and stores
    files = sorted(tmp_path.glob("*.npz"))
    assert len(files) == 1
    second = run(f"balancer.policy={policy}")  # hit: reads back
    assert plain == first == second
    # Another policy of the same study shares the file; another seed gets its own.
    run("balancer.policy=sglang")
    assert sorted(tmp_path.glob("*.npz")) == files
    run(f"balancer.policy={policy}", seed=1)
    assert len(list(tmp_path.glob("*.npz"))) == 2


def test_unreadable_cache_file_is_regenerated(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(trace_cache.ENV, str(tmp_path))
    first = run()
    (path,) = tmp_path.glob("*.npz")
    path.write_bytes(b"not a zip")
    assert run() == first
    assert trace_cache.load(path) is not None  # rewritten whole


def test_enabled_sets_the_directory_for_its_duration_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(trace_cache.ENV, raising=False)
    with trace_cache.enabled(tmp_path / "a"):
        assert trace_cache.cache_dir() == tmp_path / "a"
    assert trace_cache.cache_dir() is None
    monkeypatch.setenv(trace_cache.ENV, str(tmp_path / "mine"))
    with trace_cache.enabled(tmp_path / "a"):  # a directory the user chose wins
        assert trace_cache.cache_dir() == tmp_path / "mine"
    assert trace_cache.cache_dir() == tmp_path / "mine"


def test_traces_come_back_layer_major(tmp_path: Path) -> None:
    """Generated traces are stored layer-major and stay so through the cache file: each
    layer the run reads is one contiguous block, with the same experts."""
    router = RouterModel.build("qwen3-235b-a22b", 32, 3, 4, RoutingSpec())
    trace = generate_trace(router, np.array([40, 25]), np.zeros(2, dtype=np.int64),
                           np.random.default_rng(1))
    trace_cache.save(tmp_path / "t.npz", [trace])
    loaded = trace_cache.load(tmp_path / "t.npz")
    assert loaded is not None
    for t in (trace, loaded[0]):
        assert all(t.layer(i).flags.c_contiguous for i in range(t.layers))
    assert np.array_equal(loaded[0].experts, trace.experts)
