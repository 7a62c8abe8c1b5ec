"""PyTorch profiler (Kineto) traces into profiles: a trace made here, on the CPU with gloo."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from libra_des.cli import main
from libra_des.hardware.kineto import import_kineto
from libra_des.hardware.profile import load_profile

pytest.importorskip("torch", reason="making a Kineto trace needs torch (the calibrate extra)")

#: Two gloo ranks run a GEMM, a batched GEMM, causal attention and three collectives under
#: torch.profiler (after one untimed round, so the first call's set-up is not profiled).
MAKE_TRACE = """
import sys, torch, torch.distributed as dist, torch.multiprocessing as mp
from torch.profiler import profile, ProfilerActivity

def work(rank, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{out}/store", rank=rank, world_size=2)
    a, b = torch.randn(64, 128), torch.randn(128, 32)
    ea, eb = torch.randn(4, 16, 64), torch.randn(4, 64, 32)
    q = torch.randn(2, 4, 128, 16)
    x, y, z = torch.zeros(1024), torch.zeros(2048), torch.zeros(1024)
    def round_():
        torch.mm(a, b); torch.bmm(ea, eb)
        torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
        dist.all_reduce(x); dist.all_gather_into_tensor(y, x); dist.all_to_all_single(z, x)
    round_()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(3):
            round_()
    dist.barrier()
    if rank == 0:
        prof.export_chrome_trace(f"{out}/trace.json")
    dist.destroy_process_group()

mp.start_processes(work, args=(sys.argv[1],), nprocs=2, start_method="fork")
"""


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("kineto")
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", MAKE_TRACE, str(out)],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    return out / "trace.json"


def test_trace_samples_have_their_shapes(trace: Path) -> None:
    samples, device, _ = import_kineto(trace)
    assert device == "CPU"
    by_op: dict[str, list[object]] = {}
    for s in samples:
        by_op.setdefault(s.op, []).append(s)
    assert set(by_op) == {"gemm", "grouped_gemm", "attention", "all_reduce", "all_gather",
                          "all_to_all"}
    assert len(by_op["gemm"]) == 3
    gemm = by_op["gemm"][0]
    assert (gemm.gemm.m, gemm.gemm.n, gemm.gemm.k, gemm.gemm.dtype) == (64, 32, 128, "fp32")
    grouped = by_op["grouped_gemm"][0]
    assert (grouped.group, grouped.gemm.m, grouped.gemm.n, grouped.gemm.k) == (4, 16, 32, 64)
    attn = by_op["attention"][0].attention
    assert (attn.docs, attn.heads_q, attn.heads_kv, attn.head_dim) == (((128, 2),), 4, 4, 16)
    sizes = {s.op: {x.nbytes for x in by_op[s.op]} for s in samples if s.nbytes}
    # nccl-tests' size: the buffer for all_reduce and all_to_all, the gathered output else.
    assert sizes == {"all_reduce": {4096.0}, "all_to_all": {4096.0}, "all_gather": {8192.0}}
    assert all(s.group == 2 for s in samples if s.nbytes)
    assert all(0 < s.time.median < 10 for s in samples)


def test_trace_imports_into_a_profile_validate_accepts(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "kineto.json"
    argv = ["profile", "import", "--format", "kineto", str(trace), "--out", str(out),
            "--base", "h200-sxm", "--json"]
    assert main(argv) == 0
    prof = load_profile(out)
    assert prof.gpu == "CPU" and prof.device == "CPU"
    assert {f.op for f in prof.fits} >= {"gemm", "all_reduce", "attention"}
    capsys.readouterr()
    assert main(["validate", str(out), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["ops"]
    assert {r["op"] for r in rows} == {s.op for s in prof.samples}
    assert sum(r["n"] for r in rows) == len(prof.samples)


@pytest.mark.parametrize("text", ['{"traceEvents": 3}', "[]", '{"traceEvents": []}'])
def test_bad_traces_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 text: str) -> None:
    path = tmp_path / "t.json"
    path.write_text(text)
    argv = ["profile", "import", "--format", "kineto", str(path), "--out",
            str(tmp_path / "p.json"), "--base", "h200-sxm"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: FILE")
    assert not (tmp_path / "p.json").exists()
