"""Chakra execution traces: schema, export of a simulated step, replay on the fabric."""

from __future__ import annotations

import json
import re
import struct
import sys
from pathlib import Path

import pytest

from libra_des.cli import main
from libra_des.hardware.costs import CostModel
from libra_des.hardware.fabric.topology import load_topology
from libra_des.hardware.profiles.profile import load_profile
from libra_des.sim.chakra import schema
from libra_des.sim.chakra.files import read_inputs, write_folder
from libra_des.sim.chakra.replay import replay

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from reference import protowire  # noqa: E402

#: Field numbers of the published schema (mlcommons/chakra et_def.proto), typed in by hand.
NODE = {"id": 1, "name": 2, "type": 3, "ctrl_deps": 4, "data_deps": 5, "start_time_micros": 6,
        "duration_micros": 7, "attr": 10}
ATTR = {"name": 1, "double_val": 3, "int64_val": 9, "bool_val": 27, "string_val": 29}
SMALL = ["parallelism.dp=2", "parallelism.cp=4", "parallelism.pp=2", "parallelism.gbs=8",
         "balancer.pool_size=2", "memory.check=warn"]


def proto_table(text: str) -> dict[str, dict[str, tuple[int, str, str]]]:
    """{message: {field: (number, type, label)}} from a .proto file (the subset it uses)."""
    out: dict[str, dict[str, tuple[int, str, str]]] = {}
    text = re.sub(r"//.*", "", text)
    for name, body in re.findall(r"message (\w+) \{(.*?)\n?\}(?=\s*(?:message|enum|$))", text,
                                 re.S):
        body = re.sub(r"oneof \w+ \{|\}", "", body)
        out[name] = {f: (int(n), t, "repeated" if rep else "optional")
                     for rep, t, f, n in re.findall(r"(repeated )?(\w+) (\w+) = (\d+);", body)}
    return out


def test_generated_module_matches_the_proto_file() -> None:
    """et_def_pb2.py is current: every message, field number, type and label of the
    .proto text is in its descriptors, and the enums agree value by value."""
    from google.protobuf.descriptor import FieldDescriptor

    from libra_des.sim.chakra import et_def_pb2

    text = (ROOT / "libra_des/sim/chakra/et_def.proto").read_text()
    table = proto_table(text)
    scalar = {v: k[5:].lower() for k, v in vars(FieldDescriptor).items()
              if k.startswith("TYPE_")}
    built = {}
    for name, desc in et_def_pb2.DESCRIPTOR.message_types_by_name.items():
        built[name] = {f.name: (f.number, f.message_type.name if f.message_type else
                                f.enum_type.name if f.enum_type else scalar[f.type],
                                "repeated" if f.is_repeated else "optional")
                       for f in desc.fields}
    assert table == built
    for enum in et_def_pb2.DESCRIPTOR.enum_types_by_name.values():
        for v in enum.values:
            assert re.search(rf"\b{v.name} = {v.number};", text), v.name
    # The wire facts (Chakra's field numbers, typed in by hand above).
    assert {k: built["Node"][k][0] for k in NODE} == NODE
    assert {k: built["AttributeProto"][k][0] for k in ATTR} == ATTR


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(Chakra folder, run folder with result.json and trace.json) of one small run."""
    base = tmp_path_factory.mktemp("chakra")
    argv = ["run", str(ROOT / "scenarios/quickstart.yaml"), "--out", str(base / "run"),
            "--trace", "--chakra", str(base / "et"), "--json"]
    assert main(argv + [a for s in SMALL for a in ("--set", s)]) == 0
    return base / "et", base / "run"


def test_export_decodes_with_the_published_schema(exported: tuple[Path, Path]) -> None:
    folder, _ = exported
    files = sorted(folder.glob("libra.*.et"))
    assert len(files) == 16
    groups = json.loads((folder / "comm_group.json").read_text())
    types, colls = set(), set()
    for path in files:
        messages = protowire.delimited(path.read_bytes())
        meta = dict((n, v) for n, _, v in protowire.fields(messages[0]))
        assert meta[1] == b"0.0.4"  # GlobalMetadata.version
        seen: set[int] = set()
        for body in messages[1:]:
            f = protowire.fields(body)
            ids = [v for n, _, v in f if n == NODE["id"]]
            node_id = ids[0] if ids else 0
            deps = [d for n, w, v in f if n in (NODE["ctrl_deps"], NODE["data_deps"])
                    for d in (protowire.packed(v) if w == 2 else [v])]
            assert set(deps) <= seen  # written after every node it depends on
            seen.add(node_id)
            kind = next(v for n, _, v in f if n == NODE["type"])
            types.add(kind)
            attrs = {}
            for n, _, v in f:
                if n == NODE["attr"]:
                    a = dict((k, x) for k, _, x in protowire.fields(v))
                    attrs[a[ATTR["name"]].decode()] = a
            if kind == 4:  # COMP_NODE: exact seconds beside the whole microseconds
                dur = next(v for n, _, v in f if n == NODE["duration_micros"])
                exact = struct.unpack("<d", attrs["duration_s"][ATTR["double_val"]])[0]
                assert abs(dur - exact * 1e6) <= 0.5
            if kind == 7:  # COMM_COLL_NODE: a gradient ALL_REDUCE (0) with its size, or
                # the CP exchange, ALL_TO_ALL (6) with its exposed seconds
                ctype = attrs["comm_type"].get(ATTR["int64_val"], 0)
                assert ctype in (0, 6)
                size = attrs["comm_size"].get(ATTR["int64_val"], 0)
                assert (size > 0) == (ctype == 0)
                pg = attrs["pg_name"][ATTR["string_val"]].decode()
                assert pg.isdigit() and path.name.split(".")[1] in map(str, groups[pg])
                colls.add(ctype)
    assert types == {4, 5, 6, 7} and colls == {0, 6}
    assert all(k.isdigit() for k in groups)


def trace_totals(trace: dict[str, object]) -> tuple[float, float, float]:
    """(compute s, all-reduce bytes, p2p bytes) of the traced GPUs, from trace.json."""
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]  # type: ignore[index,union-attr]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"]  # type: ignore[index,union-attr]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    per_comm = {}
    for (pid, _), label in names.items():
        if "GPU" in label:
            stage = int(label.split()[1])
            per_comm[(pid, stage)] = per_comm.get((pid, stage), 0) + 1
    # Compute nodes hold each op less its exposed CP exchange (a communication node).
    compute = sum(e["dur"] * 1e-6 - e["args"]["attention_comm_exposed_s"] for e in events
                  if "GPU" in names[(e["pid"], e["tid"])])
    coll = p2p = 0.0
    for e in events:
        label = names[(e["pid"], e["tid"])]
        if not label.endswith("comm"):
            continue
        gpus = per_comm[(e["pid"], int(label.split()[1]))]
        if e["name"].startswith("grad-sync") and e["dur"] > 0:
            coll += gpus * (e["args"]["bytes"] + e["args"]["expert_bytes"])
        elif e["name"].startswith("recv"):
            p2p += gpus * e["args"]["bytes"]
    return compute, coll, p2p


def test_export_reimports_to_the_same_totals(
    exported: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, run = exported
    capsys.readouterr()
    assert main(["import", "chakra", str(folder), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    compute, coll, p2p = trace_totals(json.loads((run / "trace.json").read_text()))
    assert got["ranks"] == 16
    assert got["compute_s"] == pytest.approx(compute, rel=1e-9)
    assert got["collective_bytes"]["all_reduce"] == pytest.approx(coll, abs=16)
    assert got["p2p_bytes"] == pytest.approx(p2p, abs=16)
    step = json.loads((run / "result.json").read_text())["step_time_s"]["mean"]
    # The replay re-prices hand-offs and buckets on the same fabric: the step agrees closely.
    assert got["step_s"] == pytest.approx(step, rel=1e-3)


def node(cls: dict[str, object], **kw: object) -> object:
    attrs = kw.pop("attrs", {})
    n = cls["Node"](**kw)  # type: ignore[operator]
    for key, value in attrs.items():  # type: ignore[attr-defined]
        if isinstance(value, float):
            n.attr.add(name=key, double_val=value)
        else:
            n.attr.add(name=key, int64_val=value)
    return n


def two_ranks(tmp_path: Path, extra: dict[int, list[object]] | None = None) -> Path:
    """Rank r: compute 1 s (r=0) or 3 s (r=1), then a 1 GB all-reduce, then compute 2 s."""
    cls = {"Node": schema.Node}
    meta = schema.GlobalMetadata(version="0.0.4")
    files = {}
    for r, first in ((0, 1.0), (1, 3.0)):
        nodes = [node(cls, id=0, name="a", type=4, attrs={"duration_s": first}),
                 node(cls, id=1, name="ar", type=7, data_deps=[0],
                      attrs={"comm_type": 0, "comm_size": 10**9}),
                 node(cls, id=2, name="b", type=4, data_deps=[1], duration_micros=2_000_000)]
        files[r] = schema.encode_trace(meta, nodes + (extra or {}).get(r, []))
    write_folder(tmp_path, files, {})
    return tmp_path


def test_replay_matches_the_closed_form(tmp_path: Path) -> None:
    traces, groups = read_inputs([two_ranks(tmp_path)])
    topo = load_topology("h200-8x-nvswitch")
    cost = CostModel(load_profile(None), topo.fabric())
    got = replay(traces, groups, cost)
    ar = cost.collective("all_reduce", 1e9, 2, 2).seconds
    # The all-reduce waits for the slower rank (3 s), then 2 s of compute on both.
    assert got["step_s"] == pytest.approx(3.0 + ar + 2.0, rel=1e-12)
    assert got["compute_s"] == pytest.approx(1 + 3 + 2 + 2)
    assert got["collective_bytes"] == {"all_reduce": 2e9}


def test_replay_refuses_unmatched_traces(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                         ) -> None:
    cls = {"Node": schema.Node}
    lonely = node(cls, id=3, name="send", type=5, attrs={"comm_dst": 1, "comm_size": 8,
                                                          "comm_tag": 7})
    folder = two_ranks(tmp_path, {0: [lonely]})  # rank 0 sends, rank 1 never receives
    assert main(["import", "chakra", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "libra.0.et: node 3 (id 3).comm_dst" in err


def test_replay_checks_the_profile_device(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                          ) -> None:
    folder = two_ranks(tmp_path)
    argv = ["import", "chakra", str(folder), "--profile", "a100-sxm", "--json"]
    assert main(argv) == 2
    assert "measured on A100-SXM" in capsys.readouterr().err
    assert main([*argv, "--profile-scope", "borrowed"]) == 0
    assert "borrowed" in json.loads(capsys.readouterr().out)["warnings"][0]


@pytest.mark.parametrize("data", [b"\x05ab", b"\xff", b""])
def test_broken_files_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   data: bytes) -> None:
    (tmp_path / "x.0.et").write_bytes(data)
    assert main(["import", "chakra", str(tmp_path / "x.0.et")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ET")


def test_chakra_needs_a_training_scenario(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                          ) -> None:
    argv = ["run", str(ROOT / "scenarios/moe-glm45.yaml"), "--chakra", str(tmp_path / "et"),
            "--out", str(tmp_path / "run")]
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith("error: --chakra")
    assert not (tmp_path / "et").exists() and not (tmp_path / "run").exists()


def test_a_1024_gpu_step_round_trips(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                     ) -> None:
    """The quickstart's 1,024 GPUs (DP 32 x CP 8 x PP 4; 4 microbatches, one step): one file
    per rank, each decoded by the protobuf library, integer communicator ids, and a re-import
    that lands on the simulated step (hand-offs and buckets re-priced on the same fabric)."""
    argv = ["run", str(ROOT / "scenarios/quickstart.yaml"), "--out", str(tmp_path / "run"),
            "--chakra", str(tmp_path / "et"), "--json", "--set", "parallelism.gbs=128",
            "--set", "memory.check=warn"]
    assert main(argv) == 0
    step = json.loads(capsys.readouterr().out)["step_time_s"]["mean"]
    files = sorted((tmp_path / "et").glob("libra.*.et"))
    assert sorted(int(p.name.split(".")[1]) for p in files) == list(range(1024))
    groups = json.loads((tmp_path / "et/comm_group.json").read_text())
    assert all(k.isdigit() for k in groups)
    kinds = set()
    for path in files:  # every rank, decoded by protobuf itself
        _, nodes = schema.read_trace(path)
        for n in nodes:
            kinds.add(n.type)
            pg = schema.attrs(n).get("pg_name")
            assert pg is None or int(path.name.split(".")[1]) in groups[pg]
    assert kinds == {4, 5, 6, 7}
    assert main(["import", "chakra", str(tmp_path / "et"), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["ranks"] == 1024
    assert got["step_s"] == pytest.approx(step, rel=1e-3)


def test_an_astra_sim_style_all_reduce_imports(tmp_path: Path) -> None:
    """The shape of ASTRA-sim's published 8-NPU all-reduce example (its demo generator, read
    as facts: ``allreduce.<npu>.et``, version 0.0.4, one COMM_COLL_NODE of id 1 with
    ``is_cpu_op`` false, ``comm_type`` ALL_REDUCE and ``comm_size`` 1 MiB as int64, and an
    ``involved_dim`` bool list; no comm-group file): the step is one priced all-reduce."""
    for npu in range(8):
        n = schema.Node(id=1, name="All-Reduce", type=schema.COMM_COLL_NODE)
        n.attr.add(name="is_cpu_op", bool_val=False)
        n.attr.add(name="comm_type", int64_val=0)
        n.attr.add(name="comm_size", int64_val=1_048_576)
        n.attr.add(name="involved_dim").bool_list.values.append(True)
        data = schema.encode_trace(schema.GlobalMetadata(version="0.0.4"), [n])
        (tmp_path / f"allreduce.{npu}.et").write_bytes(data)
    traces, groups = read_inputs([tmp_path])
    topo = load_topology("h200-8x-nvswitch")
    cost = CostModel(load_profile(None), topo.fabric())
    got = replay(traces, groups, cost)
    assert got["step_s"] == pytest.approx(
        cost.collective("all_reduce", 1_048_576, 8, 8).seconds, rel=1e-12)
    assert got["collective_bytes"] == {"all_reduce": 8 * 1_048_576}


def test_two_steps_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Steps repeat op names: each hand-off feeds its own step's op, so two exported steps
    replay to the two simulated ones together."""
    argv = ["run", str(ROOT / "scenarios/quickstart.yaml"), "--out", str(tmp_path / "run"),
            "--chakra", str(tmp_path / "et"), "--json", "--set", "steps=2"]
    assert main(argv + [a for s in SMALL for a in ("--set", s)]) == 0
    step = json.loads(capsys.readouterr().out)["step_time_s"]["mean"]
    assert main(["import", "chakra", str(tmp_path / "et"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["step_s"] == pytest.approx(2 * step, rel=1e-3)
