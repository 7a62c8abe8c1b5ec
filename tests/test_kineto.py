"""PyTorch profiler (Kineto) traces into profiles: a trace made here, on the CPU with gloo."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from libra_des.cli import main
from libra_des.hardware.profiles.kineto import import_kineto
from libra_des.hardware.profiles.profile import load_profile

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
    pytest.importorskip("torch", reason="making a Kineto trace needs torch (the calibrate extra)")
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


def gpu_trace() -> dict[str, object]:
    """A hand-made GPU trace in Kineto's layout: a GEMM operator whose inner op launched two
    kernels, and an NCCL all-gather kernel carrying its message args."""
    mm = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 7, "ts": 100.0,
          "dur": 50.0, "args": {"External id": 10, "Input Dims": [[4096, 2048], [2048, 1024]],
                                "Input type": ["c10::BFloat16", "c10::BFloat16"]}}
    inner = {"ph": "X", "cat": "cpu_op", "name": "aten::_inner", "pid": 1, "tid": 7,
             "ts": 110.0, "dur": 20.0, "args": {"External id": 11}}
    kernels = [{"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16", "pid": 0, "tid": 7,
                "ts": 200.0 + i, "dur": 30.0, "args": {"External id": 11}} for i in range(2)]
    nccl = {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL", "pid": 0,
            "tid": 8, "ts": 300.0, "dur": 80.0,
            "args": {"Collective name": "_allgather_base", "In msg nelems": 1024,
                     "Out msg nelems": 8192, "Group size": 8, "dtype": "BFloat16"}}
    return {"traceEvents": [mm, inner, *kernels, nccl],
            "deviceProperties": [{"name": "NVIDIA H200"}] * 8}


def test_gpu_kernels_give_device_time(tmp_path: Path) -> None:
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps(gpu_trace()))
    samples, device, _ = import_kineto(path)
    assert device == "NVIDIA H200"
    gemm, gather = sorted(samples, key=lambda s: s.op)[::-1]
    assert gemm.op == "gemm" and gemm.time.median == pytest.approx(60e-6)  # both kernels
    assert (gemm.gemm.m, gemm.gemm.n, gemm.gemm.k, gemm.gemm.dtype) == (4096, 1024, 2048, "bf16")
    assert gather.op == "all_gather" and gather.nbytes == 8192 * 2  # the gathered output
    assert (gather.group, gather.gpus_per_node) == (8, 8)
    assert gather.time.median == pytest.approx(80e-6)
