"""ECMP as a distribution: seeded per-flow hashes, spraying, and the K-sample ensemble."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from libra_des.cli import main
from libra_des.config import ROOT, load_scenario
from libra_des.errors import InputError
from libra_des.hardware.fabric.link_loads import hashed_bounds
from libra_des.hardware.fabric.routing import (
    Routing,
    ecmp_salts,
    flow_hash,
    flow_hashes,
)
from libra_des.hardware.fabric.topology import load_topology
from libra_des.sim.network.flow.flow_model import Network
from libra_des.sim.training.simulator import simulate_training

QUICK = str(ROOT / "scenarios" / "quickstart.yaml")
#: The quickstart on 128 GPUs in detailed mode, two pools per stage on 4:1 rail leaves of one
#: node each (so the spine can bind: PXN keeps a leaf group's messages on its rail leaves).
SMALL = ("parallelism.dp=4", "parallelism.gbs=32", "balancer.pool_size=2", "fidelity=detailed",
         "topology_params.levels.1.oversubscription=4", "topology_params.levels.1.fan_out=1",
         "model.layers=8")


def spine_of(topo_routes: list[list[str]]) -> list[str]:
    return [next(v for v in hops if v.startswith("spine")) for hops in topo_routes]


def cross_spine_routes(routing: Routing) -> list[list[str]]:
    """Routes of 64 flows that must cross the spine (different rails, different nodes)."""
    topo = load_topology("h200-roce-railopt", {"nodes": 16}).routed(routing)
    return [[v for _, v in topo.route(src, 8 * 9 + (src + 1) % 8)] for src in range(64)]


def test_seeds_give_different_routes_and_the_same_seed_the_same() -> None:
    a = spine_of(cross_spine_routes(Routing.sample("ecmp", 0)))
    again = spine_of(cross_spine_routes(Routing.sample("ecmp", 0)))
    b = spine_of(cross_spine_routes(Routing.sample("ecmp", 1)))
    second = spine_of(cross_spine_routes(Routing.sample("ecmp", 0, 1)))
    assert a == again, "the same seed routes the same way"
    assert a != b and a != second, "another seed (or sample) picks other spines"
    assert len(set(a)) > 4, "a hash spreads flows over the spines"


def test_salts_come_from_the_seed_tree_and_sample_zero_is_stable() -> None:
    assert ecmp_salts(7, 1)[0] == ecmp_salts(7, 8)[0], "sample 0 does not depend on K"
    assert len(set(ecmp_salts(7, 8))) == 8
    assert ecmp_salts(7, 3) == ecmp_salts(7, 3)
    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, 1 << 20, 200), rng.integers(0, 1 << 20, 200)
    salt = ecmp_salts(5, 1)[0]
    vector = flow_hashes(src, dst, salt)
    assert [int(v) for v in vector] == [flow_hash(int(s), int(d), salt) for s, d in zip(
        src, dst, strict=True)], "the array hash is the scalar one"


@pytest.mark.parametrize("pxn", [False, True])
def test_hashed_bound_counts_the_busiest_uplink_as_the_routes_do(pxn: bool) -> None:
    """The vectorised bound against loads summed over the topology's own point-to-point
    routes (with PXN: out on the proxy's NIC)."""
    topo = load_topology("h200-roce-railopt", {"nodes": 16, "levels.1.oversubscription": 4,
                                               "levels.1.fan_out": 8}).relaying(pxn)
    assert topo.pxn == pxn
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, 128, 300), rng.integers(0, 128, 300)
    size = rng.uniform(1e6, 1e8, 300)
    for k in range(3):
        routing = Routing.sample("ecmp", 0, k)
        routed = topo.routed(routing)
        load: dict[tuple[str, str], float] = {}
        for s, d, b in zip(src, dst, size, strict=True):
            for link in routed.p2p_route(int(s), int(d)):
                if s // 8 != d // 8:
                    load[link] = load.get(link, 0.0) + b
        expect = max(v / routed.link(lk).bandwidth for lk, v in load.items()
                     if "nvsw" not in lk[0] + lk[1] and "pcie" not in lk[0] + lk[1])
        bounds, crossed = hashed_bounds(topo, src, dst, size, (routing,))
        assert crossed and bounds.shape == (1, 1)
        assert bounds[0, 0] == pytest.approx(expect, rel=1e-12)


def test_spray_bundles_every_spine_into_one_link() -> None:
    topo = load_topology("h200-roce-railopt", {"nodes": 16}).routed(Routing("spray"))
    hops = [v for _, v in topo.route(0, 8 * 9 + 1)]
    assert "spine*" in hops
    one = load_topology("h200-roce-railopt", {"nodes": 16}).link(("leaf0.0", "spine0"))
    bundle = topo.link(("leaf0.0", "spine*"))
    assert bundle.bandwidth == pytest.approx(8 * one.bandwidth)  # 8 spines, split evenly
    assert bundle.latency == one.latency


def test_spray_is_no_slower_than_any_hash_on_an_all_to_all() -> None:
    """Even splitting balances the uplinks: the ideal case bounds every hash's makespan."""
    import simpy

    def makespan(routing: Routing) -> float:
        topo = load_topology("h200-roce-railopt", {"nodes": 4, "levels.1.oversubscription": 8})
        env = simpy.Environment()
        net = Network(env, topo.routed(routing))
        env.run(net.collective("all_to_all", list(range(32)), 32 * 64e6))
        return float(env.now)

    spray = makespan(Routing("spray"))
    hashed = [makespan(Routing.sample("ecmp", 0, k)) for k in range(3)]
    assert all(spray <= t * (1 + 1e-9) for t in hashed)
    assert max(hashed) > spray * 1.01, "collisions cost something on an 8:1 fabric"


@pytest.mark.parametrize(("setting", "field"), [
    ("network.ecmp_samples=0", "network.ecmp_samples"),
    ("network.ecmp_samples=-2", "network.ecmp_samples"),
    ("network.ecmp_samples=2.5", "network.ecmp_samples"),
    ("network.ecmp_samples=true", "network.ecmp_samples"),
    ("network.routing=foo", "network.routing"),
    ("network.ecmp_seed=-1", "network.ecmp_seed"),
])
def test_bad_network_settings_are_one_line_exit_2(
    setting: str, field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", QUICK, "--set", setting, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err
    assert not (tmp_path / "r").exists()


def test_an_ensemble_needs_a_flow_level_fidelity(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", QUICK, "--set", "network.ecmp_samples=4", "--out", str(tmp_path / "r")]
    assert main(argv) == 2
    assert "network.ecmp_samples" in capsys.readouterr().err
    with pytest.raises(InputError):
        load_scenario(ROOT / "scenarios" / "moe-ep-2node-h200-roce-railopt.yaml",
                      ["network.ecmp_samples=2"])


def run_json(tmp_path: Path, capsys: pytest.CaptureFixture[str], *sets: str) -> dict:
    argv = ["run", QUICK, "--out", str(tmp_path / "r"), "--json"]
    assert main(argv + [a for s in (*SMALL, *sets) for a in ("--set", s)]) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_eight_samples_report_a_spread_and_sample_zero_is_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = run_json(tmp_path, capsys)
    ens = run_json(tmp_path, capsys, "network.ecmp_samples=8")
    e = ens["ecmp"]
    assert e["samples"] == 8 and e["method"] == "light replay" and e["routing"] == "ecmp"
    assert len(e["per_sample_step_time_s"]) == 8
    assert e["per_sample_step_time_s"][0] == one["step_time_s"]["mean"]
    assert ens["step_time_s"] == one["step_time_s"], "the run is sample 0"
    for key in ("step_time_s", "comm_exposed_fraction", "comm_exposed_s"):
        s = e[key]
        assert s["min"] <= s["mean"] <= s["max"] and s["std"] >= 0
    assert e["step_time_s"]["max"] > e["step_time_s"]["min"], "hashes spread the step"
    assert 0 <= e["comm_exposed_fraction"]["min"] <= e["comm_exposed_fraction"]["max"] <= 1
    again = run_json(tmp_path, capsys, "network.ecmp_samples=8")
    assert json.dumps(again["ecmp"]) == json.dumps(e), "the same seed is byte-identical"
    other = run_json(tmp_path, capsys, "network.ecmp_samples=8", "network.ecmp_seed=9")
    assert other["ecmp"]["per_sample_step_time_s"] != e["per_sample_step_time_s"]
    assert "network" not in one["scenario"] and ens["scenario"]["network"]["ecmp_samples"] == 8


def test_light_replay_with_the_runs_own_hash_repeats_the_run() -> None:
    """Every sample hashed like the run: the replays must give the run's step exactly (up
    to the float round-off of re-adding the recorded durations)."""
    sc = load_scenario(QUICK, [*SMALL, "network.ecmp_samples=3"])
    from libra_des.sim.training import simulator

    # Salts 0, 2**64 and 2**65 hash alike (the hash reads 64 bits) but are distinct samples.
    same = tuple(Routing("ecmp", k << 64) for k in range(3))
    original = simulator.ecmp_routings
    simulator.ecmp_routings = lambda _s: same  # type: ignore[assignment]
    try:
        (rec,) = simulate_training(sc, np.random.default_rng(sc.seed))
    finally:
        simulator.ecmp_routings = original  # type: ignore[assignment]
    assert len(rec.ecmp) == 2 and not rec.ecmp_exact
    for sample in rec.ecmp:
        assert sample.step_time == pytest.approx(rec.step_time, rel=1e-9)
