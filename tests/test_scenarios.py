"""Every shipped scenario runs, at a reduced size, under every balancer policy its comments name.

The reduction keeps each scenario's model shape, topology, schedule, PP depth, memory policy
and knobs, and shrinks what only sets the size: DP, CP, GBS, layers, packed length or batch,
and steps. Policies are read from the file's comments, so a scenario that advertises a policy
it cannot run fails here.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from libra_des.config import ROOT, load_scenario, read_yaml
from libra_des.kinds.simulation import simulate

#: The papers' policies, in the registries' order (the shipped training balancers and MoE
#: systems; a scenario may name any registered one).
TRAINING_POLICIES = ("ulysses", "wlb_llm", "distca", "libra")
MOE_POLICIES = ("sglang", "eplb", "lina", "harmoeny", "libra")
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))


def named_policies(path: Path) -> list[str]:
    """The scenario's own policy plus every policy its comment lines name."""
    raw = read_yaml(path)
    kind = raw.get("kind", "training")
    known = TRAINING_POLICIES if kind == "training" else MOE_POLICIES
    comments = " ".join(line for line in path.read_text().splitlines()
                        if line.lstrip().startswith("#"))
    words = set(re.findall(r"[a-z_]+", comments))
    own = raw.get("balancer", {}).get("policy", "libra")
    return sorted({own} | {p for p in known if p in words})


def reduced(path: Path) -> list[str]:
    raw = read_yaml(path)
    if raw.get("kind", "training") != "training":
        dense = load_scenario(path).model.dense_layers
        return [f"model.layers={dense + 2}", "workload.batches=1", "workload.batch=4",
                "workload.seq_len=256"]
    pp = int(raw.get("parallelism", {}).get("pp", 1))
    dp, cp = 2, 2
    gpus = dp * cp * pp
    # DP groups sit one replica per node until the layout fix: enough nodes for DP 2.
    nodes = max(dp, math.ceil(gpus / 8))
    return [f"parallelism.dp={dp}", f"parallelism.cp={cp}", f"parallelism.gbs={dp * pp}",
            "balancer.pool_size=2", f"model.layers={2 * pp}", "workload.packed_length=16384",
            "steps=1", f"topology_params.nodes={nodes}"]


CASES = [pytest.param(p, pol, id=f"{p.stem}-{pol}") for p in SCENARIOS for pol in named_policies(p)]


@pytest.mark.parametrize(("path", "policy"), CASES)
def test_scenario_runs_reduced(path: Path, policy: str) -> None:
    sc = load_scenario(path, [*reduced(path), f"balancer.policy={policy}"])
    res, _ = simulate(sc)
    if sc.kind == "training":
        assert res["step_time_s"]["mean"] > 0 and 0 < res["mfu"] < 1
        assert not res["oom"] and len(res["peak_memory_gib"]) == sc.parallelism.pp
    else:
        assert res["moe_layer_s"] > 0


def test_every_scenario_names_a_memory_policy() -> None:
    for path in SCENARIOS:
        raw = read_yaml(path)
        if raw.get("kind", "training") == "training":
            assert "recompute" in raw.get("memory", {}), path.name
