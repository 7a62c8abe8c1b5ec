"""Traces: checked against the Chrome trace event format (JSON object form).

Perfetto's trace processor (PyPI ``perfetto``) downloads its binary on first use, which this
project's machines cannot do, so the format check below is the test: every event has the
fields its phase needs, spans on one track nest, flows pair up and bind to spans, counters
carry numbers, and the metadata names scenario, seed and version.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from libra_des.cli import main
from libra_des.results import trace as training_trace

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--set", "parallelism.dp=2", "--set", "parallelism.pp=2", "--set",
        "parallelism.gbs=8", "--set", "balancer.pool_size=2", "--set", "model.layers=2",
        "--set", "steps=2"]
TINY_MOE = ["--set", "model.layers=3", "--set", "workload.batches=1", "--set",
            "workload.batch=4", "--set", "workload.seq_len=128"]
PHASES = {"X", "M", "C", "s", "f"}


def check_chrome_trace(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Validate the document; returns events by phase."""
    assert set(doc) >= {"traceEvents", "otherData"} and doc["displayTimeUnit"] in ("ms", "ns")
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for ev in doc["traceEvents"]:
        assert ev["ph"] in PHASES, ev
        assert isinstance(ev["pid"], int) and isinstance(ev["name"], str), ev
        if ev["ph"] != "M":
            assert isinstance(ev["ts"], float | int) and math.isfinite(ev["ts"]), ev
        if ev["ph"] == "X":
            assert ev["dur"] >= 0 and isinstance(ev["tid"], int) and isinstance(ev["args"], dict)
        if ev["ph"] == "M" and ev["name"].endswith("_name"):
            assert ev["name"] in ("process_name", "thread_name") and ev["args"]["name"]
        if ev["ph"] == "M" and ev["name"].endswith("_sort_index"):
            # Tracks sort by number: a thread's index is its tid, a process's its pid.
            assert ev["args"]["sort_index"] == ev.get("tid", ev["pid"]), ev
        if ev["ph"] == "C":
            assert ev["args"] and all(isinstance(v, float) and math.isfinite(v)
                                      for v in ev["args"].values()), ev
        if ev["ph"] in "sf":
            assert {"id", "cat", "tid"} <= set(ev), ev
        by[ev["ph"]].append(ev)
    tracks: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    for ev in by["X"]:
        tracks[ev["pid"], ev["tid"]].append((ev["ts"], ev["ts"] + ev["dur"]))
    for spans in tracks.values():  # spans on one track are disjoint or nested
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack: list[float] = []
        for t0, t1 in spans:
            while stack and stack[-1] <= t0 + 1e-6:
                stack.pop()
            assert not stack or t1 <= stack[-1] + 1e-6, (t0, t1, stack)
            stack.append(t1)
    starts = {ev["id"]: ev for ev in by["s"]}
    ends = {ev["id"]: ev for ev in by["f"]}
    assert starts.keys() == ends.keys()
    for fid, ev in [*starts.items(), *ends.items()]:  # each end of a flow binds to a span
        assert any(t0 - 1e-6 <= ev["ts"] <= t1 + 1e-6 for t0, t1 in tracks[ev["pid"], ev["tid"]]
                   ), (fid, ev)
        assert ev["ph"] == "s" or ev["bp"] == "e"
    return by


def trace_of(tmp_path: Path, scenario: str, *sets: str) -> dict[str, Any]:
    assert main(["run", str(ROOT / "scenarios" / scenario), *sets, "--trace", "--out",
                 str(tmp_path), "--json"]) == 0
    doc: dict[str, Any] = json.loads((tmp_path / "trace.json").read_text())
    return doc


def test_training_trace_per_gpu_with_flows_and_counters(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = trace_of(tmp_path, "quickstart.yaml", *TINY)
    by = check_chrome_trace(doc)
    meta = doc["otherData"]
    assert meta["scenario"] == "quickstart" and meta["seed"] == 0 and meta["libra_des"]
    assert meta["tracks"] == "per GPU" and "note" not in meta
    names = [ev["args"]["name"] for ev in by["M"] if ev["name"] == "thread_name"]
    gpu_tracks = [n for n in names if " GPU " in n]
    assert len(gpu_tracks) == meta["traced_gpus"] == 2 * 2 * 8  # dp x pp x cp, one pool
    assert len(set(gpu_tracks)) == len(gpu_tracks)
    # Tracks ordered by their sort index list GPUs in numeric order (GPU 2 before GPU 10).
    order = {(ev["pid"], ev["tid"]): ev["args"]["sort_index"] for ev in by["M"]
             if ev["name"] == "thread_sort_index"}
    named = {(ev["pid"], ev["tid"]): ev["args"]["name"] for ev in by["M"]
             if ev["name"] == "thread_name"}
    assert order.keys() == named.keys()
    stage0 = sorted((order[k], int(n.split()[-1])) for k, n in named.items()
                    if n.startswith("stage 0 GPU") and k[0] == 0)
    assert [g for _, g in stage0] == sorted(g for _, g in stage0) and len(stage0) > 9
    assert len(by["s"]) > 0  # pipeline hand-offs between the two stages
    held = [ev for ev in by["C"] if ev["name"] == "activations held (microbatches)"]
    assert held and held[-1]["args"] == {"stage 0": 0.0, "stage 1": 0.0}  # all backwards ran
    assert max(max(ev["args"].values()) for ev in held) <= 4  # microbatches per replica
    flight = [ev["args"]["bytes"] for ev in by["C"] if ev["name"] == "p2p bytes in flight"]
    assert flight and flight[-1] == 0.0 and max(flight) > 0


def test_training_trace_groups_ranks_above_the_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(training_trace, "GPU_TRACK_LIMIT", 4)
    doc = trace_of(tmp_path, "quickstart.yaml", *TINY)
    check_chrome_trace(doc)
    assert doc["otherData"]["tracks"] == "per rank group" and "limit of 4" in \
        doc["otherData"]["note"]
    names = [ev["args"]["name"] for ev in doc["traceEvents"] if ev["name"] == "thread_name"]
    assert not any(" GPU " in n for n in names) and any("compute (GPUs" in n for n in names)


def test_moe_prefill_trace_has_stages_per_gpu_per_layer(tmp_path: Path) -> None:
    doc = trace_of(tmp_path, "paper-moe-breakdown.yaml", *TINY_MOE)
    by = check_chrome_trace(doc)
    assert doc["otherData"]["kind"] == "moe_inference"
    gpus = {ev["pid"] for ev in by["X"] if ev["pid"] < 8}
    assert gpus == set(range(8))  # EP 8
    layers = {ev["args"]["layer"] for ev in by["X"]}
    assert layers == {0, 1, 2}
    per_gpu = {(ev["pid"], ev["name"].split()[0]) for ev in by["X"]}
    for g in range(8):
        assert {(g, "attention"), (g, "moe_local")} <= per_gpu
    assert any(ev["name"] == "link transfers in flight" for ev in by["C"])
