"""Measure kernels and collectives with torch and write a fitted calibration profile.

    python -m calibration.harness --out PROFILE.json [--device auto|cuda|cpu]
        [--ops attention,gemm,grouped_gemm,all_reduce,all_gather,reduce_scatter,all_to_all,
        send_recv] [--world N] [--sizes quick|full] [--base auto|NAME] [--seed S]

The only torch-importing part of the project: ``libra_des`` never imports this module; this
module imports ``libra_des`` to build, fit and save the profile, so the simulator's own fitting
code (``hardware/fitting.py``) turns the measurements into cost-model parameters.

Measurement method (assumptions):

- Every case runs a few warm-up calls first (allocations, cuDNN/cuBLAS heuristics, NCCL
  channel set-up), then a number of timed repeats sized to a per-case time budget. On a GPU a
  repeat is timed with CUDA events after a device synchronisation; on a CPU with
  ``time.perf_counter``. A sample stores median, mean, min, max and std over the repeats; the
  fits use the median.
- attention: varlen causal forward. Documents of equal length are one batched
  ``scaled_dot_product_attention`` call (``is_causal=True`` inside each document), so a call
  over a length mix is one launch per distinct length; ``flash_attn_varlen_func`` (one launch)
  is used instead when ``flash-attn`` is importable on a GPU. Recorded as
  :class:`~libra_des.hardware.profile.AttentionShape` (length, count) runs, as the importers
  record the public H100 table, so the same fitter applies.
- gemm: ``[m, k] x [k, n]`` (bf16 on GPU, fp32 on CPU). grouped_gemm: ``E`` experts with
  ``m`` rows each, timed as one batched GEMM launch (``torch.bmm``), i.e. a grouped GEMM under
  even routing; the sample keeps the per-expert shape in ``gemm`` and ``E`` in ``group``. They
  enter the fit of the grouped-GEMM tile model (``hardware/kernels.grouped_seconds``), and
  ``libra-des validate`` reports its error on them.
- collectives: one process per GPU (NCCL) or ``--world`` processes (gloo on CPU), spawned here.
  A repeat aligns the group (a one-element all_reduce and a synchronisation), then runs the
  collective ``inner`` times back to back (nccl-tests style, so launch skew is amortised) and
  divides; the repeat's time is the slowest rank's. ``nbytes`` follows nccl-tests' ``size``
  column: the buffer for all_reduce, the gathered output for all_gather, the input for
  reduce_scatter, each rank's whole send buffer for all_to_all, the message for send_recv.
- CPU runs have no datasheet: the profile's peaks are this run's own probes (the best fp32
  GEMM rate and a large copy's bandwidth), every dtype at the fp32 rate (attention runs in fp32
  on a CPU), kernels run on one thread (a thread pool's timings swing with any other load),
  and the "interconnect" is one host whose link rate is that copy bandwidth.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from rich.console import Console
from torch.nn.attention import SDPBackend, sdpa_kernel

from libra_des.errors import InputError
from libra_des.hardware.fitting import fit_profile
from libra_des.hardware.profile import (
    AttentionShape,
    GemmShape,
    Interconnect,
    Peaks,
    Profile,
    Sample,
    Sourced,
    TimeStats,
    datasheet_for,
    load_profile,
    save_profile,
)

KERNEL_OPS = ("attention", "gemm", "grouped_gemm")
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")
ALL_OPS = KERNEL_OPS + COLLECTIVES
SOURCE = "libra-des calibration harness"
#: CUDA events resolve about 0.5 us; a repeat reading zero is below the clock, not free.
CLOCK_FLOOR_S = 5e-7

LOG = Console(stderr=True)


# ----------------------------------------------------------------------------- size sets


@dataclass(frozen=True)
class Sizes:
    """What one ``--sizes`` choice measures on one kind of device."""

    attn_tokens: int  # tokens per attention call (all documents together)
    attn_lengths: tuple[int, ...]  # uniform-mix document lengths
    attn_heads: tuple[int, ...]  # query heads; KV heads = heads / 8 (at least 1)
    head_dim: int
    gemm_m: tuple[int, ...]
    gemm_nk: tuple[tuple[int, int], ...]
    experts: tuple[int, ...]
    expert_m: tuple[int, ...]
    expert_nk: tuple[tuple[int, int], ...]
    coll_bytes: tuple[int, ...]
    coll_repeats: int
    budget_s: float  # target timed seconds per kernel case
    max_repeats: int


KIB, MIB = 1 << 10, 1 << 20
# Expert shapes from Qwen3-30B-A3B (hidden 2048, expert FFN 768; docs/model.md part A):
# gate+up [m, 2048] x [2048, 1536], down [m, 768] x [768, 2048].
QWEN3_EXPERT = ((1536, 2048), (2048, 768))
# One set per (device kind, --sizes); each line groups one benchmark's fields.
# fmt: off
SIZE_SETS: dict[tuple[str, str], Sizes] = {
    ("cpu", "quick"): Sizes(
        attn_tokens=512, attn_lengths=(512, 128, 32), attn_heads=(2, 4), head_dim=64,
        gemm_m=(16, 64, 256), gemm_nk=((64, 64), (256, 256), (512, 128)),
        experts=(4, 8), expert_m=(8, 32, 128), expert_nk=((128, 256),),
        coll_bytes=tuple(4 * KIB * 4**i for i in range(6)), coll_repeats=15, budget_s=0.03,
        max_repeats=30),
    ("cpu", "full"): Sizes(
        attn_tokens=2048, attn_lengths=(2048, 512, 128, 32), attn_heads=(2, 4, 8), head_dim=64,
        gemm_m=(16, 64, 256, 1024), gemm_nk=((64, 64), (256, 256), (1024, 512)),
        experts=(4, 8, 16), expert_m=(8, 32, 128, 512), expert_nk=((128, 256), (512, 256)),
        coll_bytes=tuple(KIB * 2**i for i in range(15)), coll_repeats=10, budget_s=0.1,
        max_repeats=50),
    ("cuda", "quick"): Sizes(
        attn_tokens=16384, attn_lengths=(16384, 4096, 1024, 256, 64), attn_heads=(8, 32, 64),
        head_dim=128, gemm_m=(64, 256, 1024, 4096, 16384),
        gemm_nk=((2048, 2048), (4096, 4096), (8192, 8192)),
        experts=(8, 16, 128), expert_m=(16, 64, 256, 1024), expert_nk=QWEN3_EXPERT,
        coll_bytes=tuple(16 * KIB * 2**i for i in range(15)), coll_repeats=10, budget_s=0.02,
        max_repeats=50),
    ("cuda", "full"): Sizes(
        attn_tokens=32768, attn_lengths=(32768, 8192, 2048, 512, 128, 32),
        attn_heads=(4, 8, 16, 32, 64), head_dim=128,
        gemm_m=(16, 64, 256, 1024, 4096, 16384, 65536),
        gemm_nk=((1024, 1024), (2048, 2048), (4096, 4096), (8192, 8192), (16384, 4096)),
        experts=(4, 8, 16, 32, 128), expert_m=(4, 16, 64, 256, 1024, 4096), expert_nk=QWEN3_EXPERT,
        coll_bytes=tuple(KIB * 2**i for i in range(21)), coll_repeats=20, budget_s=0.05,
        max_repeats=100),
}
# fmt: on


# ----------------------------------------------------------------------------- timing


@dataclass(frozen=True)
class Clock:
    """Times one repeat: CUDA events on a GPU (device time), perf_counter on a CPU."""

    cuda: bool

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def seconds(self, fn: Callable[[], object]) -> float:
        self.sync()
        if not self.cuda:
            t0 = time.perf_counter()
            fn()
            return time.perf_counter() - t0
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) * 1e-3


def stats(times: Sequence[float]) -> TimeStats:
    t = np.maximum(np.asarray(times, dtype=np.float64), CLOCK_FLOOR_S)
    return TimeStats(
        median=float(np.median(t)),
        mean=float(t.mean()),
        min=float(t.min()),
        max=float(t.max()),
        std=float(t.std()),
    )


def measure(fn: Callable[[], object], clock: Clock, sizes: Sizes, warmup: int = 3) -> TimeStats:
    """Warm up, size the repeats to the case budget from the warm-up times, time them."""
    warm = [clock.seconds(fn) for _ in range(warmup)]
    repeats = int(np.clip(sizes.budget_s / max(min(warm), 1e-7), 5, sizes.max_repeats))
    return stats([clock.seconds(fn) for _ in range(repeats)])


# ----------------------------------------------------------------------------- kernels


@dataclass(frozen=True)
class KernelBench:
    """Kernel benchmarks on one device (dtype bf16 on a GPU, fp32 on a CPU)."""

    device: torch.device
    sizes: Sizes
    rng: np.random.Generator

    @property
    def clock(self) -> Clock:
        return Clock(self.device.type == "cuda")

    @property
    def dtype(self) -> torch.dtype:
        return torch.bfloat16 if self.device.type == "cuda" else torch.float32

    @property
    def dtype_name(self) -> str:
        return "bf16" if self.device.type == "cuda" else "fp32"

    def tensor(self, *shape: int) -> torch.Tensor:
        # Values only need to be finite and non-degenerate; torch's own generator is seeded
        # from the harness's numpy generator so reruns draw the same tensors.
        gen = torch.Generator(device=self.device).manual_seed(int(self.rng.integers(2**31)))
        return torch.randn(*shape, device=self.device, dtype=self.dtype, generator=gen)

    # -- attention
    def mixes(self) -> list[tuple[tuple[int, int], ...]]:
        """Uniform mixes, one long document among short ones, and two long-tailed draws."""
        total, s = self.sizes.attn_tokens, self.sizes
        out: list[tuple[tuple[int, int], ...]]
        out = [((length, total // length),) for length in s.attn_lengths]
        short = min(s.attn_lengths)
        out.append(tuple(sorted({(total // 2, 1), (short, total // 2 // short)})))
        out += [tailed_mix(total, short, self.rng) for _ in range(2)]
        return list(dict.fromkeys(out))  # two draws may coincide on tiny sizes

    def attention(self, flash: Callable[..., torch.Tensor] | None) -> list[Sample]:
        samples = []
        with self.fast_sdpa():
            for docs in self.mixes():
                for heads in self.sizes.attn_heads:
                    shape = AttentionShape(
                        docs=docs,
                        heads_q=heads,
                        heads_kv=max(1, heads // 8),
                        head_dim=self.sizes.head_dim,
                    )
                    call, how, shape = self.attention_call(shape, flash)
                    samples.append(
                        Sample(
                            op="attention",
                            attention=shape,
                            time=measure(call, self.clock, self.sizes),
                            source=f"{SOURCE}: {how} {self.dtype_name} {self.device.type}",
                        )
                    )
        return samples

    def fast_sdpa(self) -> AbstractContextManager[object]:
        """On a GPU, forbid SDPA's unfused math fallback: a case no fused kernel takes fails
        loudly instead of timing a different algorithm."""
        if self.device.type != "cuda":
            return nullcontext()
        fused = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]
        return sdpa_kernel([*fused, SDPBackend.CUDNN_ATTENTION])

    def attention_call(
        self, a: AttentionShape, flash: Callable[..., torch.Tensor] | None
    ) -> tuple[Callable[[], object], str, AttentionShape]:
        """The timed call, its name, and the shape it really runs: if no fused kernel takes
        grouped K/V heads, K/V are expanded to one head per query head (same FLOPs; the
        sample then says ``heads_kv = heads_q``)."""
        d, hq, hkv = a.head_dim, a.heads_q, a.heads_kv
        if flash is not None:
            lengths = np.repeat([x[0] for x in a.docs], [x[1] for x in a.docs])
            tokens = int(lengths.sum())
            cu = torch.tensor(np.concatenate([[0], np.cumsum(lengths)]), dtype=torch.int32)
            cu = cu.to(self.device)
            q, k, v = (self.tensor(tokens, h, d) for h in (hq, hkv, hkv))
            top = int(lengths.max())
            varlen = partial(flash, q, k, v, cu, cu, top, top, causal=True)
            return varlen, "flash_attn_varlen", a
        sdpa = torch.nn.functional.scaled_dot_product_attention
        for kv_heads in (hkv, hq):
            runs = [
                (self.tensor(count, hq, length, d), self.tensor(count, kv_heads, length, d))
                for length, count in a.docs
            ]

            def call(runs: list[tuple[torch.Tensor, torch.Tensor]] = runs) -> None:
                for q, kv in runs:
                    sdpa(q, kv, kv, is_causal=True, enable_gqa=kv.shape[1] != q.shape[1])

            try:
                call()
            except RuntimeError:
                if kv_heads == hq:
                    raise
                continue
            return call, "torch sdpa", a.model_copy(update={"heads_kv": kv_heads})
        raise AssertionError("unreachable: the expanded K/V call either ran or raised")

    # -- GEMMs
    def gemm(self) -> list[Sample]:
        samples = []
        for n, k in self.sizes.gemm_nk:
            for m in self.sizes.gemm_m:
                a, b = self.tensor(m, k), self.tensor(k, n)
                c = torch.empty(m, n, device=self.device, dtype=self.dtype)
                samples.append(
                    Sample(
                        op="gemm",
                        gemm=GemmShape(m=m, n=n, k=k, dtype=self.dtype_name),
                        time=measure(partial(torch.mm, a, b, out=c), self.clock, self.sizes),
                        source=f"{SOURCE}: torch.mm {self.device.type}",
                    )
                )
        return samples

    def grouped_gemm(self) -> list[Sample]:
        samples = []
        for n, k in self.sizes.expert_nk:
            for experts in self.sizes.experts:
                for m in self.sizes.expert_m:
                    a, b = self.tensor(experts, m, k), self.tensor(experts, k, n)
                    c = torch.empty(experts, m, n, device=self.device, dtype=self.dtype)
                    samples.append(
                        Sample(
                            op="grouped_gemm",
                            gemm=GemmShape(m=m, n=n, k=k, dtype=self.dtype_name),
                            group=experts,
                            time=measure(partial(torch.bmm, a, b, out=c), self.clock, self.sizes),
                            source=f"{SOURCE}: torch.bmm, even routing, {self.device.type}",
                        )
                    )
        return samples


def tailed_mix(total: int, floor: int, rng: np.random.Generator) -> tuple[tuple[int, int], ...]:
    """Long-tailed document lengths summing to ``total``: log-normal around 4x ``floor``
    (sigma 1.2), rounded to powers of two so a call has few distinct lengths; the last
    document takes the remainder."""
    draws = rng.lognormal(math.log(4 * floor), 1.2, size=max(8, 4 * total // floor))
    lengths = np.clip(2.0 ** np.round(np.log2(draws)), floor, total).astype(np.int64)
    ends = np.cumsum(lengths)
    keep = lengths[ends < total]
    lengths = np.append(keep, total - int(keep.sum()))
    values, counts = np.unique(lengths, return_counts=True)
    return tuple((int(v), int(c)) for v, c in zip(values, counts, strict=True))


def flash_varlen(device: torch.device) -> Callable[..., torch.Tensor] | None:
    if device.type != "cuda":
        return None
    try:
        from flash_attn import flash_attn_varlen_func  # type: ignore[import-not-found]
    except ImportError:
        return None
    return flash_attn_varlen_func  # type: ignore[no-any-return,unused-ignore]


# ----------------------------------------------------------------------------- collectives


@dataclass(frozen=True)
class CollectivePlan:
    """What every rank runs; rank 0 writes the rows to ``result`` (JSON)."""

    backend: str
    world: int
    ops: tuple[str, ...]
    sizes: tuple[int, ...]
    groups: tuple[int, ...]
    repeats: int
    store: str
    result: str


def collective_worker(rank: int, plan: CollectivePlan) -> None:
    cuda = plan.backend == "nccl"
    if cuda:
        torch.cuda.set_device(rank)
    else:
        # Ranks share the host's cores; one thread each keeps them from oversubscribing.
        torch.set_num_threads(1)
    dist.init_process_group(
        plan.backend, init_method=f"file://{plan.store}", rank=rank, world_size=plan.world
    )
    device = torch.device("cuda", rank) if cuda else torch.device("cpu")
    rows: list[dict[str, object]] = []
    try:
        for g in plan.groups:
            sub = dist.new_group(list(range(g))) if g < plan.world else dist.group.WORLD
            for op in plan.ops:
                if op == "send_recv" and g != 2:
                    continue
                for nbytes in plan.sizes:
                    case = CollectiveCase(op, nbytes, g, rank, sub, device)
                    times = case.run(plan.repeats) if rank < g else np.zeros(plan.repeats)
                    slowest = torch.tensor(times, dtype=torch.float64, device=device)
                    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
                    if rank == 0:
                        rows.append({**case.record(), "times": slowest.cpu().tolist()})
    finally:
        dist.destroy_process_group()
    if rank == 0:
        Path(plan.result).write_text(json.dumps(rows))


@dataclass(frozen=True)
class CollectiveCase:
    """One collective at one size on the first ``group`` ranks (element type fp32 on gloo,
    bf16 on NCCL; sizes rounded down to whole elements per rank)."""

    op: str
    nbytes: int
    group: int
    rank: int
    pg: object
    device: torch.device

    @property
    def dtype(self) -> torch.dtype:
        return torch.bfloat16 if self.device.type == "cuda" else torch.float32

    @property
    def count(self) -> int:
        """Elements of the nccl-tests ``size`` buffer (a multiple of the group size)."""
        elem = torch.empty(0, dtype=self.dtype).element_size()
        return max(self.group, self.nbytes // elem // self.group * self.group)

    def record(self) -> dict[str, object]:
        elem = torch.empty(0, dtype=self.dtype).element_size()
        return {"op": self.op, "nbytes": self.count * elem, "group": self.group}

    def call(self) -> Callable[[], object]:
        n, g, pg = self.count, self.group, self.pg

        def buf(size: int) -> torch.Tensor:
            return torch.zeros(size, dtype=self.dtype, device=self.device)

        if self.op == "all_reduce":
            x = buf(n)
            return lambda: dist.all_reduce(x, group=pg)
        if self.op == "all_gather":
            x, y = buf(n // g), buf(n)
            gather = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)
            return lambda: gather(y, x, group=pg)
        if self.op == "reduce_scatter":
            x, y = buf(n), buf(n // g)
            scatter = getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)
            return lambda: scatter(y, x, group=pg)
        if self.op == "all_to_all":
            x, y = buf(n), buf(n)
            return lambda: dist.all_to_all_single(y, x, group=pg)
        x = buf(n)  # send_recv: rank 0 sends to rank 1
        return (lambda: dist.send(x, dst=1)) if self.rank == 0 else (lambda: dist.recv(x, src=0))

    def run(self, repeats: int) -> np.ndarray:
        clock = Clock(self.device.type == "cuda")
        fn = self.call()
        flag = torch.zeros(1, device=self.device)
        inner = 1 if self.nbytes >= MIB else 5

        def burst() -> None:
            for _ in range(inner):
                fn()

        for _ in range(3):
            fn()
        out = np.empty(repeats)
        for i in range(repeats):
            dist.all_reduce(flag, group=self.pg)  # align the group's ranks
            out[i] = clock.seconds(burst) / inner
        return out


def run_collectives(plan: CollectivePlan, cuda: bool) -> list[Sample]:
    """Spawn the ranks (fork on a CPU: no torch re-import; spawn with CUDA, which cannot be
    forked once initialised) and turn rank 0's rows into samples."""
    method = "fork" if not cuda and "fork" in mp.get_all_start_methods() else "spawn"
    mp.start_processes(collective_worker, args=(plan,), nprocs=plan.world, start_method=method)
    rows = json.loads(Path(plan.result).read_text())
    how = f"torch.distributed {plan.backend}"
    return [
        Sample(
            op=r["op"],
            nbytes=float(r["nbytes"]),
            group=r["group"],
            gpus_per_node=r["group"],
            time=stats(r["times"]),
            source=f"{SOURCE}: {how} world {plan.world}",
        )
        for r in rows
    ]


def collective_groups(world: int) -> tuple[int, ...]:
    return tuple(sorted({g for g in (2, 4, 8) if g <= world} | {world}))


# ----------------------------------------------------------------------------- the machine


def best_rate(fn: Callable[[], object], work: float, clock: Clock, repeats: int = 5) -> float:
    fn()
    return work / min(clock.seconds(fn) for _ in range(repeats))


def cpu_profile(base: Profile, world: int, gemm: list[Sample]) -> Profile:
    """Peaks and 'interconnect' of a CPU host, from probes (module docstring)."""
    clock = Clock(False)
    a = torch.randn(1024, 1024)
    flops = best_rate(lambda: a @ a, 2 * 1024**3, clock)
    measured = [2 * s.gemm.m * s.gemm.n * s.gemm.k / s.time.median for s in gemm if s.gemm]
    flops = max([flops, *measured])
    src = torch.zeros(16 * MIB)  # 16 Mi fp32 = 64 MiB
    dst = torch.empty_like(src)
    copy_bw = best_rate(lambda: dst.copy_(src), 2 * src.numel() * 4, clock)
    why = "measured by the harness on this CPU (no datasheet): best fp32 GEMM rate"
    rate = Sourced(value=float(f"{flops:.6g}"), source=f"{why}; every dtype runs at it here")
    copy = Sourced(
        value=float(f"{copy_bw:.6g}"),
        source="measured by the harness: best 64 MiB tensor copy, read + write bytes per second",
    )
    peaks = Peaks(bf16_flops=rate, fp16_flops=rate, fp32_flops=rate, hbm_bytes_per_s=copy)
    link = Interconnect(
        name=f"one host, {world} gloo ranks over loopback TCP (modelled as a non-blocking switch)",
        gpus_per_node=max(world, 1),
        nics_per_node=0,
        intra_bw=copy,
        inter_bw=copy,
        intra_latency=Sourced(value=1e-6, source="assumption: loopback hop; the fit's alpha wins"),
        inter_latency=Sourced(value=1e-6, source="unused: a single host"),
    )
    return base.model_copy(update={"peaks": peaks, "interconnect": link})


def software(cuda: bool, flash: bool) -> dict[str, str]:
    out = {"torch": torch.__version__, "python": platform.python_version()}
    if cuda:
        out["cuda"] = str(torch.version.cuda)
        out["nccl"] = ".".join(str(x) for x in torch.cuda.nccl.version())
        if flash:
            import flash_attn  # type: ignore[import-not-found,unused-ignore]

            out["flash_attn"] = str(flash_attn.__version__)
    else:
        out["distributed"] = "gloo"
    return out


def device_name(cuda: bool) -> str:
    if cuda:
        return torch.cuda.get_device_name(0)
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return f"CPU {line.split(':', 1)[1].strip()}"
    return f"CPU {platform.processor() or platform.machine()}"


# ----------------------------------------------------------------------------- command line


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m calibration.harness",
        description="Measure kernels and collectives with torch and write a fitted profile.",
        epilog="examples:\n"
        "  python -m calibration.harness --out h200.json             # all GPUs, quick sizes\n"
        "  python -m calibration.harness --out cpu.json --device cpu --world 2\n"
        "  python -m calibration.harness --out a.json --ops attention,gemm --sizes full\n"
        "The measurement method is described in calibration/harness.py's docstring.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", required=True, help="profile JSON to write")
    p.add_argument("--device", default="auto", help="auto | cuda | cpu")
    p.add_argument("--ops", default=",".join(ALL_OPS), help=",".join(ALL_OPS))
    p.add_argument("--world", type=int, default=None, help="ranks (gloo: 2; NCCL: all GPUs)")
    p.add_argument("--sizes", default="quick", help="quick | full")
    p.add_argument("--base", default="auto", help="datasheet profile (auto: from the device)")
    p.add_argument("--seed", type=int, default=0, help="seed of the long-tailed length mixes")
    return p.parse_args(argv)


@dataclass(frozen=True)
class Options:
    """A validated command line (defaults as the flags')."""

    out: Path
    cuda: bool
    ops: tuple[str, ...] = ALL_OPS
    world: int = 2
    sizes: Sizes = SIZE_SETS[("cpu", "quick")]
    base: str = "auto"
    seed: int = 0


def options(args: argparse.Namespace) -> Options:
    if args.device not in ("auto", "cuda", "cpu"):
        raise InputError("--device", args.device, "auto | cuda | cpu")
    have_cuda = torch.cuda.is_available()
    if args.device == "cuda" and not have_cuda:
        raise InputError("--device", "cuda", "cpu | auto (torch sees no CUDA device)")
    cuda = args.device == "cuda" or (args.device == "auto" and have_cuda)
    ops = tuple(o.strip() for o in args.ops.split(",") if o.strip())
    bad = [o for o in ops if o not in ALL_OPS]
    if bad or not ops:
        raise InputError("--ops", args.ops, "a comma-separated subset of " + ",".join(ALL_OPS))
    if args.sizes not in ("quick", "full"):
        raise InputError("--sizes", args.sizes, "quick | full")
    gpus = torch.cuda.device_count() if cuda else 0
    world = args.world if args.world is not None else (gpus if cuda else 2)
    wants_ranks = any(o in COLLECTIVES for o in ops)
    if cuda and not 1 <= world <= gpus:
        raise InputError("--world", world, f"1..{gpus} (the visible GPUs)")
    if not cuda and wants_ranks and world < 2:
        raise InputError("--world", world, "at least 2 gloo ranks for collectives")
    sizes = SIZE_SETS[("cuda" if cuda else "cpu", args.sizes)]
    return Options(Path(args.out), cuda, ops, world, sizes, args.base, args.seed)


def base_profile(opt: Options, device: str) -> Profile:
    """The datasheet the profile starts from, without its fits (every fit in the output
    comes from this run's measurements)."""
    if opt.base != "auto":
        base = load_profile(opt.base)
    elif opt.cuda:
        base = datasheet_for(device)
    else:
        base = load_profile(None)  # a CPU takes kernel-model start values only
    return base.model_copy(update={"fits": (), "samples": ()})


def collect(opt: Options, tmp: str) -> list[Sample]:
    """Collectives first: on a CPU the ranks are forked before this process starts any
    OpenMP thread pool (forking after one is used can hang the children)."""
    samples: list[Sample] = []
    coll = tuple(o for o in opt.ops if o in COLLECTIVES)
    if coll and opt.world >= 2:
        plan = CollectivePlan(
            backend="nccl" if opt.cuda else "gloo",
            world=opt.world,
            ops=coll,
            sizes=opt.sizes.coll_bytes,
            groups=collective_groups(opt.world),
            repeats=opt.sizes.coll_repeats,
            store=os.path.join(tmp, "store"),
            result=os.path.join(tmp, "collectives.json"),
        )
        t0 = time.perf_counter()
        samples += run_collectives(plan, opt.cuda)
        took = time.perf_counter() - t0
        LOG.log(f"collectives on groups {plan.groups}: {len(samples)} samples in {took:.1f} s")
    elif coll:
        LOG.log(f"[yellow]skipping {','.join(coll)}: one GPU visible, a collective needs two")
    device = torch.device("cuda", 0) if opt.cuda else torch.device("cpu")
    if not opt.cuda:
        # One thread: intra-op thread pools make CPU timings swing with any other load on
        # the host; the CPU profile describes one core (its probes run on one thread too).
        torch.set_num_threads(1)
    bench = KernelBench(device, opt.sizes, np.random.default_rng(opt.seed))
    flash = flash_varlen(device)
    runs: dict[str, Callable[[], list[Sample]]] = {
        "attention": lambda: bench.attention(flash),
        "gemm": bench.gemm,
        "grouped_gemm": bench.grouped_gemm,
    }
    for op in (o for o in KERNEL_OPS if o in opt.ops):
        t0 = time.perf_counter()
        got = runs[op]()
        samples += got
        LOG.log(f"{op}: {len(got)} samples in {time.perf_counter() - t0:.1f} s")
    return samples


def main(argv: Sequence[str] | None = None) -> int:
    try:
        opt = options(parse_args(argv))
        started = time.perf_counter()
        name = device_name(opt.cuda)
        LOG.log(f"calibrating {name} ({'NCCL' if opt.cuda else 'gloo'}, world {opt.world})")
        base = base_profile(opt, name)
        with tempfile.TemporaryDirectory(prefix="libra-des-harness-") as tmp:
            samples = collect(opt, tmp)
        if not opt.cuda:
            base = cpu_profile(base, opt.world, [s for s in samples if s.op == "gemm"])
        prof = replace_meta(base, opt, name)
        fitted, results = fit_profile(prof.with_samples(tuple(samples)))
        save_profile(fitted.with_samples(tuple(samples)), opt.out)
    except InputError as exc:
        sys.stderr.write(exc.line() + "\n")
        return 2
    took = time.perf_counter() - started
    LOG.log(f"wrote {opt.out}: {len(samples)} samples, {len(results)} fits in {took:.1f} s")
    return 0


def replace_meta(base: Profile, opt: Options, device: str) -> Profile:
    flash = flash_varlen(torch.device("cuda" if opt.cuda else "cpu")) is not None
    return base.model_copy(
        update={
            "name": opt.out.stem,
            "device": device,
            "software": software(opt.cuda, flash),
            "source": SOURCE,
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
        }
    )


if __name__ == "__main__":
    raise SystemExit(main())
