"""Hostile Chakra inputs: every one is refused with one line naming the file, the node and
the field (exit 2), never a traceback; a property-based fuzz of the reader."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from libra_des.cli import main
from libra_des.errors import InputError
from libra_des.sim.chakra import files as chakra_files
from libra_des.sim.chakra import schema
from libra_des.sim.chakra.files import read_inputs, write_folder
from libra_des.sim.chakra.replay import replay


def node(nid: int, kind: int, deps: tuple[int, ...] = (), **attr: Any) -> Any:
    n = schema.Node(id=nid, name=f"n{nid}", type=kind, data_deps=list(deps),
                    duration_micros=1000)
    for key, value in attr.items():
        if isinstance(value, str):
            n.attr.add(name=key, string_val=value)
        else:
            n.attr.add(name=key, int64_val=value)
    return n


def valid() -> dict[int, list[Any]]:
    """Two ranks: compute, an all-reduce over group "0", rank 0 sends 64 bytes to rank 1."""
    out = {}
    for r in (0, 1):
        p2p = (node(2, 5, (1,), comm_dst=1, comm_size=64, comm_tag=3) if r == 0 else
               node(2, 6, (1,), comm_src=0, comm_size=64, comm_tag=3))
        out[r] = [node(0, 4), node(1, 7, (0,), comm_type=0, comm_size=4096, pg_name="0"), p2p]
    return out


def write(folder: Path, traces: dict[int, list[Any]],
          groups: dict[str, list[int]] | None = None) -> Path:
    meta = schema.GlobalMetadata(version="0.0.4")
    write_folder(folder, {r: schema.encode_trace(meta, ns) for r, ns in traces.items()},
                 {"0": [0, 1]} if groups is None else groups)
    return folder


def refused(folder: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["import", "chakra", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ")
    return err


def test_the_valid_pair_imports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", "chakra", str(write(tmp_path, valid())), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["collective_bytes"] == {"all_reduce": 8192} and got["p2p_bytes"] == 64


def edit(traces: dict[int, list[Any]], rank: int, index: int, key: str, value: Any
         ) -> dict[int, list[Any]]:
    n = traces[rank][index]
    kept = [a for a in n.attr if a.name != key]
    del n.attr[:]
    n.attr.extend(kept)
    if isinstance(value, str):
        n.attr.add(name=key, string_val=value)
    else:
        n.attr.add(name=key, int64_val=value)
    return traces


@pytest.mark.parametrize(("rank", "index", "key", "value", "names"), [
    (0, 1, "comm_size", "4096", "libra.0.et: node 1 (id 1).comm_size"),  # a text tag
    (1, 2, "comm_src", "zero", "libra.1.et: node 2 (id 2).comm_src"),
    (0, 2, "comm_tag", "three", "libra.0.et: node 2 (id 2).comm_tag"),
    (1, 1, "comm_size", 8192, "libra.1.et: node 1 (id 1).comm_size"),  # sizes disagree
    (1, 1, "comm_type", 2, "libra.1.et: node 1 (id 1).comm_type"),  # ops disagree
    (1, 2, "comm_size", 65, "libra.1.et: node 2 (id 2).comm_size"),  # send 64, receive 65
    (0, 1, "pg_name", "7", "libra.0.et: node 1 (id 1).pg_name"),  # no group 7
    (0, 1, "pg_name", "dp_cp", "libra.0.et: node 1 (id 1).pg_name"),  # a name, not an id
    (0, 1, "comm_size", 10**16, "libra.0.et: node 1 (id 1).comm_size"),  # absurd size
    (0, 2, "comm_dst", 5, "libra.0.et: node 2 (id 2).comm_dst"),  # no rank 5
])
def test_hostile_fields_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     rank: int, index: int, key: str, value: Any,
                                     names: str) -> None:
    err = refused(write(tmp_path, edit(valid(), rank, index, key, value)), capsys)
    assert f"error: {names}:" in err


def test_a_collective_without_bytes_lasts_its_recorded_time(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """comm_size 0 (the export's CP exchange): nothing to price, the recorded 1 ms stands;
    after 1 ms of compute the step is 2 ms on both ranks."""
    traces = {r: [node(0, 4), node(1, 7, (0,), comm_type=6, comm_size=0, pg_name="0")]
              for r in (0, 1)}
    assert main(["import", "chakra", str(write(tmp_path, traces)), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["step_s"] == pytest.approx(0.002, rel=1e-12)


def test_a_collective_needs_its_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                     ) -> None:
    traces = valid()
    kept = [a for a in traces[1][1].attr if a.name != "comm_size"]
    del traces[1][1].attr[:]
    traces[1][1].attr.extend(kept)
    assert "libra.1.et: node 1 (id 1).comm_size: got '(missing)'" in refused(
        write(tmp_path, traces), capsys)


def test_a_group_without_the_rank_is_refused(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    traces = valid()
    traces = edit(edit(traces, 0, 1, "pg_name", "1"), 1, 1, "pg_name", "1")
    err = refused(write(tmp_path, traces, {"0": [0, 1], "1": [1]}), capsys)
    assert "libra.0.et: node 1 (id 1).pg_name" in err and "holding rank 0" in err


@pytest.mark.parametrize("groups", [{"dp": [0, 1]}, {"0": [0, 0]}, {"0": [0, True]},
                                    {"0": [0, 9]}])
def test_bad_comm_groups_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     groups: dict[str, list[int]]) -> None:
    assert refused(write(tmp_path, valid(), groups), capsys).startswith("error: comm_group")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs need POSIX")
def test_fifos_are_refused_unopened(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                    ) -> None:
    os.mkfifo(tmp_path / "libra.0.et")
    assert "this is a pipe" in refused(tmp_path / "libra.0.et", capsys)
    assert "this is a pipe" in refused(tmp_path, capsys)  # one inside a folder too
    other = write(tmp_path / "ok", valid())
    (other / "comm_group.json").unlink()
    os.mkfifo(other / "comm_group.json")
    assert refused(other, capsys).startswith("error: comm_group.json: got")


def test_too_many_ranks_are_refused_before_reading(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(chakra_files, "MAX_RANKS", 1)
    assert "at most 1 ranks" in refused(write(tmp_path, valid()), capsys)


def test_chakra_export_takes_no_rank_selection(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    root = Path(__file__).resolve().parents[1]
    argv = ["run", str(root / "scenarios/quickstart.yaml"), "--out", str(tmp_path / "r"),
            "--trace", "--trace-ranks", "0", "--chakra", str(tmp_path / "et")]
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith("error: --trace-ranks")
    assert not (tmp_path / "et").exists() and not (tmp_path / "r").exists()


def read_and_replay(folder: Path) -> None:
    from libra_des.hardware.costs import CostModel
    from libra_des.hardware.fabric.topology import load_topology
    from libra_des.hardware.profiles.profile import load_profile

    traces, groups = read_inputs([folder])
    replay(traces, groups, CostModel(load_profile(None), load_topology(
        "h200-8x-nvswitch").fabric()))


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzzed_traces_import_or_refuse_in_one_line(tmp_path: Path, data: st.DataObject
                                                    ) -> None:
    """Random byte edits of a valid file, or random values of its fields: the reader either
    imports it or raises InputError, never another exception."""
    folder = write(tmp_path / f"f{data.draw(st.integers(0, 10**9))}", valid())
    path = folder / f"libra.{data.draw(st.integers(0, 1))}.et"
    if data.draw(st.booleans()):
        raw = bytearray(path.read_bytes())
        for _ in range(data.draw(st.integers(1, 4))):
            at = data.draw(st.integers(0, len(raw) - 1))
            raw[at] = data.draw(st.integers(0, 255))
        path.write_bytes(bytes(raw))
    else:
        rank = int(path.name.split(".")[1])
        traces = valid()
        key = data.draw(st.sampled_from(["comm_size", "comm_type", "comm_tag", "comm_src",
                                         "comm_dst", "pg_name", "duration_s"]))
        value = data.draw(st.one_of(st.integers(-2**63, 2**63 - 1), st.text(max_size=4)))
        write(folder, edit(traces, rank, data.draw(st.integers(0, 2)), key, value))
    try:
        read_and_replay(folder)
    except InputError as exc:
        assert "\n" not in exc.line()
