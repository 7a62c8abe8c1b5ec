"""Fuzzing the one-line-error contract: mutated scenarios, flags, profiles, logs.

Hypothesis mutates valid inputs (type swaps, non-finite, huge, negative, truncated, deeply
nested values). Every outcome must be exit 0 with a plausible result, or exit 2 with exactly
one ``error:`` line. The CLI is called in-process. Mutated scenarios are validated for real;
their simulation is replaced by a stub (a 1,024-GPU run per example would not fit the suite's
time budget), except in :func:`test_fuzz_tiny_runs`, which simulates 16-GPU, 2-layer
variants for real and so also exercises the built-in plausibility checks.
"""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from libra_des.cli import main
from libra_des.commands import run as run_cmd
from libra_des.config import ROOT

FUZZ = settings(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
QUICK = yaml.safe_load((ROOT / "scenarios/quickstart.yaml").read_text())
PROFILE = json.loads((ROOT / "calibration/profiles/h200-sxm.json").read_text())
COUNTER = itertools.count()

HOSTILE = st.one_of(
    st.sampled_from([None, True, False, 0, -1, -(2**63), 2**64, 10**300, 0.5, -0.0, 1e308,
                     "1", "", "nan", ".inf", "1e12", [], {}, [1, 2], {"a": 1}]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.text(max_size=20),
    st.recursive(st.integers(0, 3), lambda inner: st.lists(inner, max_size=2), max_leaves=60),
)
#: --set values as text: YAML-looking tokens a careless user types.
SET_TEXT = st.one_of(
    st.sampled_from([".inf", "-.inf", ".nan", "NaN", "Infinity", "1e999", "true", "yes", "'8'",
                     "\"8\"", "0", "-8", "1e12", "0x10", "[8]", "{a: 1}", "8.5", "", "~",
                     "[" * 50 + "]" * 50, "{a: 1, a: 2}", "9" * 300]),
    st.text(max_size=12),
)


def paths(node: Any, prefix: str = "") -> list[str]:
    """Dotted paths of every value of a nested mapping."""
    out = []
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{prefix}.{key}" if prefix else str(key)
            out.append(here)
            out += paths(value, here)
    return out


SCENARIO_KEYS = [
    *paths(QUICK),
    "parallelism.virtual_stages", "balancer.slots", "variance.noise_sigma", "model.layers",
    "model.heads_kv", "model.dense_layers", "workload.packed_length", "workload.lengths.max",
    "workload.lengths.min", "workload.lengths.median", "topology_params.nodes", "fidelity",
    "comm_free", "seed", "steps",
]


def put(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(data)
    node = out
    keys = path.split(".")
    for key in keys[:-1]:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    node[keys[-1]] = value
    return out


def fake_simulate(scenario: Any, **_kw: Any) -> tuple[dict[str, Any], None]:
    return {"kind": scenario.kind, "fake": True, "scenario": scenario.model_dump(mode="json")}, None


def outcome(capsys: pytest.CaptureFixture[str], argv: list[str]) -> int:
    """Run the CLI; assert the contract (0, or 2 with one line); return the code."""
    try:
        code = main(argv)
    except SystemExit as stop:  # argparse usage errors exit from inside the parser
        code = int(stop.code or 0)
    err = capsys.readouterr().err
    assert code in (0, 2), (argv, code, err)
    if code == 2:
        assert err.count("\n") == 1 and err.startswith("error:"), (argv, err)
    return code


def scratch(tmp_path: Path) -> Path:
    folder = tmp_path / f"case{next(COUNTER)}"
    folder.mkdir()
    return folder


@FUZZ
@given(key=st.sampled_from(SCENARIO_KEYS), value=HOSTILE)
def test_fuzz_scenario_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    key: str, value: Any,
) -> None:
    monkeypatch.setattr(run_cmd, "simulate", fake_simulate)
    monkeypatch.setattr(run_cmd, "summary_table", lambda *_a: "")
    folder = scratch(tmp_path)
    path = folder / "s.yaml"
    try:
        path.write_text(yaml.safe_dump(put(QUICK, key, value)))
    except (yaml.YAMLError, RecursionError):
        return
    outcome(capsys, ["run", str(path), "--out", str(folder / "out"), "--json"])


@FUZZ
@given(key=st.sampled_from(SCENARIO_KEYS), text=SET_TEXT)
def test_fuzz_set_values(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    key: str, text: str,
) -> None:
    monkeypatch.setattr(run_cmd, "simulate", fake_simulate)
    folder = scratch(tmp_path)
    quick = str(ROOT / "scenarios/quickstart.yaml")
    outcome(capsys, ["run", quick, "--set", f"{key}={text}", "--out", str(folder), "--json"])


PROFILE_KEYS = [*(p for p in paths(PROFILE) if not p.startswith(("samples", "fits"))), "fits"]


@FUZZ
@given(key=st.sampled_from(PROFILE_KEYS), value=HOSTILE)
def test_fuzz_profiles(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, key: str, value: Any
) -> None:
    folder = scratch(tmp_path)
    path = folder / "p.json"
    path.write_text(json.dumps(put(PROFILE, key, value)))
    outcome(capsys, ["profile", "show", str(path)])


NCCL = (
    "$ ./build/all_reduce_perf -b 8M -e 32M -f 2 -g 8\n"
    "# nThread 1 nGpus 8 minBytes 8388608 maxBytes 33554432\n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    "     time   algbw   busbw #wrong\n"
    "     8388608       2097152     float     sum      -1    90.77   92.42  161.73      0"
    "    90.10   93.10  162.93      0\n"
    "    16777216       4194304     float     sum      -1    130.5  128.56  224.98      0"
    "    130.1  128.96  225.67      0\n"
    "    33554432       8388608     float     sum      -1    210.1  159.71  279.49      0"
    "    209.8  159.94  279.89      0\n"
)
TOKENS = st.sampled_from(["nan", "inf", "-1", "0", "1" * 300, "1e999", "13", "x", "", "-0",
                          "8388608.5", "１２"])


@FUZZ
@given(cut=st.integers(0, len(NCCL)), which=st.integers(0, 200), token=TOKENS)
def test_fuzz_nccl_tests_logs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, cut: int, which: int, token: str
) -> None:
    words = NCCL.split(" ")
    words[which % len(words)] = token
    text = " ".join(words)[:cut] if cut < len(NCCL) else " ".join(words)
    folder = scratch(tmp_path)
    path = folder / "all_reduce.txt"
    path.write_text(text)
    code = outcome(capsys, ["profile", "import", "--format", "nccl-tests", str(path),
                            "--out", str(folder / "p.json"), "--device", "H200"])
    if code == 0:  # whatever was imported is a whole, sane row of the original table
        saved = json.loads((folder / "p.json").read_text())
        times = {s["nbytes"]: s["time"]["median"] for s in saved["samples"]}
        assert set(times) <= {8388608.0, 16777216.0, 33554432.0}
        assert all(1e-6 < t < 1e-3 for t in times.values())


TINY = {
    "name": "tiny", "kind": "training", "steps": 1, "topology": "h200-roce-railopt",
    "model": "qwen3-30b-a3b", "workload": "longctx-256k",
    "parallelism": {"dp": 2, "pp": 1, "cp": 8, "tp": 1, "gbs": 2},
    "balancer": {"policy": "libra", "pool_size": 2},
}
TINY_KNOBS = st.sampled_from([
    ("seed", st.integers(0, 2**63)),
    ("variance.noise_sigma", st.floats(0, 1)),
    ("balancer.slack", st.floats(0, 1)),
    ("balancer.policy", st.sampled_from(["libra", "ulysses", "wlb_llm", "distca"])),
    ("balancer.chunks", st.sampled_from([1, 2, 4, 3])),
    ("variance.slow_gpu_fraction", st.floats(0, 1)),
    ("variance.slow_factor", st.floats(1, 100)),
    ("comm_free", st.booleans()),
    ("workload.lengths.max", st.integers(2_000, 300_000)),
])


@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_tiny_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data: st.DataObject
) -> None:
    key, values = data.draw(TINY_KNOBS)
    folder = scratch(tmp_path)
    path = folder / "tiny.yaml"
    path.write_text(yaml.safe_dump(put(TINY, key, data.draw(values))))
    argv = ["run", str(path), "--set", "model.layers=2", "--out", str(folder), "--json"]
    if outcome(capsys, argv) == 0:
        result = json.loads((folder / "result.json").read_text())
        assert 0 <= result["mfu"] <= 1 and result["step_time_s"]["mean"] > 0


MOE = yaml.safe_load((ROOT / "scenarios/moe-glm45.yaml").read_text())
MOE_KEYS = [*paths(MOE), "workload.routing.profile_requests", "workload.routing.trace",
            "model.top_k", "model.experts", "balancer.accuracy", "parallelism.pp"]


@FUZZ
@given(key=st.sampled_from(MOE_KEYS), value=HOSTILE)
def test_fuzz_moe_scenarios(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    key: str, value: Any,
) -> None:
    monkeypatch.setattr(run_cmd, "simulate", fake_simulate)
    folder = scratch(tmp_path)
    path = folder / "m.yaml"
    try:
        path.write_text(yaml.safe_dump(put(MOE, key, value)))
    except (yaml.YAMLError, RecursionError):
        return
    outcome(capsys, ["run", str(path), "--out", str(folder / "out"), "--json"])


COST_FLAGS = ["--bytes", "--group", "--gpus-per-node", "--heads", "--kv-heads", "--head-dim",
              "--cp", "--m", "--n", "--k", "--doc-lengths", "--dtype", "--algorithm"]


@FUZZ
@given(op=st.sampled_from(["all_reduce", "all_to_all", "send_recv", "attention", "gemm"]),
       flag=st.sampled_from(COST_FLAGS), text=SET_TEXT)
def test_fuzz_cost_flags(
    capsys: pytest.CaptureFixture[str], op: str, flag: str, text: str
) -> None:
    base = {"all_reduce": ["--bytes", "4096", "--group", "8"],
            "all_to_all": ["--bytes", "4096", "--group", "16"],
            "send_recv": ["--bytes", "4096", "--group", "2"],
            "attention": ["--doc-lengths", "4096,1024", "--heads", "8", "--kv-heads", "2"],
            "gemm": ["--m", "64", "--n", "64", "--k", "64"]}[op]
    outcome(capsys, ["cost", "--op", op, *base, f"{flag}={text}", "--json"])
