"""Collectives, all-to-all and kernel-under-collective interference on spawned ranks.

One process per GPU (NCCL) or ``world`` processes (gloo on a CPU). Assumptions:

- A repeat aligns the group (a one-element all_reduce and a synchronisation), then runs the
  collective ``inner`` times back to back (nccl-tests style, so launch skew is amortised) and
  divides; the repeat's time is the slowest rank's. ``nbytes`` follows nccl-tests' ``size``
  column: the buffer for all_reduce, the gathered output for all_gather, the input for
  reduce_scatter, each rank's whole send buffer for all_to_all, the message for send_recv.
- Groups are ranks ``0..g-1`` for every ``g`` from 2 to the world (every group size the node
  allows; on a GPU node ranks are GPUs in device order).
- Interference: on the whole world, every rank runs a burst of one GEMM shape while a
  collective is in flight (``async_op``; NCCL's own stream on a GPU, gloo's thread on a CPU).
  Each case records the GEMM alone, the GEMM under the collective, the collective alone and
  the wall time of both launched together, each the median over repeats of the slowest rank.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from libra_des.calibrate.kernels import Clock, dtype_of, stats
from libra_des.calibrate.sizes import MIB, SOURCE, collective_groups
from libra_des.hardware.profiles.profile import Interference, Sample

if TYPE_CHECKING:
    import torch

#: Collectives measured under a GEMM (the two a training step overlaps with compute).
OVERLAP_OPS = ("all_reduce", "all_to_all")


@dataclass(frozen=True)
class CollectivePlan:
    """What every rank runs; rank 0 writes the rows to ``result`` (JSON)."""

    backend: str
    world: int
    ops: tuple[str, ...]
    sizes: tuple[int, ...]
    repeats: int
    store: str
    result: str
    overlap_gemm: tuple[int, int, int] = (256, 256, 256)
    overlap_bytes: tuple[int, ...] = ()

    @property
    def groups(self) -> tuple[int, ...]:
        return collective_groups(self.world)


def collective_worker(rank: int, plan: CollectivePlan) -> None:
    import torch
    import torch.distributed as dist

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
    overlaps: list[dict[str, object]] = []
    try:
        for g in plan.groups:
            sub = dist.new_group(list(range(g))) if g < plan.world else dist.group.WORLD
            for op in plan.ops:
                if op == "send_recv" and g != 2:
                    continue
                for nbytes in plan.sizes:
                    case = CollectiveCase(op, nbytes, g, rank, sub, device)
                    times = case.run(plan.repeats) if rank < g else np.zeros(plan.repeats)
                    slowest = slowest_times(times, device)
                    if rank == 0:
                        rows.append({**case.record(), "times": slowest})
        for op in (o for o in OVERLAP_OPS if o in plan.ops):
            for nbytes in plan.overlap_bytes:
                case = CollectiveCase(op, nbytes, plan.world, rank, dist.group.WORLD, device)
                got = overlap_case(case, plan.overlap_gemm, plan.repeats)
                if rank == 0:
                    overlaps.append({**case.record(), **got})
    finally:
        dist.destroy_process_group()
    if rank == 0:
        Path(plan.result).write_text(json.dumps({"rows": rows, "overlaps": overlaps}))


def slowest_times(times: np.ndarray, device: torch.device) -> list[float]:
    """Each repeat's time on the slowest rank (every rank must call this)."""
    import torch
    import torch.distributed as dist

    slowest = torch.tensor(times, dtype=torch.float64, device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return [float(x) for x in slowest.cpu().tolist()]


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
    def elem(self) -> int:
        import torch

        return int(torch.empty(0, dtype=dtype_of(self.device)).element_size())

    @property
    def count(self) -> int:
        """Elements of the nccl-tests ``size`` buffer (a multiple of the group size)."""
        return max(self.group, self.nbytes // self.elem // self.group * self.group)

    def record(self) -> dict[str, object]:
        return {"op": self.op, "nbytes": self.count * self.elem, "group": self.group}

    def call(self, async_op: bool = False) -> Callable[[], Any]:
        import torch
        import torch.distributed as dist

        n, g, pg = self.count, self.group, self.pg

        def buf(size: int) -> torch.Tensor:
            return torch.zeros(size, dtype=dtype_of(self.device), device=self.device)

        if self.op == "all_reduce":
            x = buf(n)
            return lambda: dist.all_reduce(x, group=pg, async_op=async_op)
        # torch 2.13 names them *_single; older releases *_into_tensor / *_tensor.
        gather = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)
        scatter = getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)
        if self.op == "all_gather":
            x, y = buf(n // g), buf(n)
            return lambda: gather(y, x, group=pg, async_op=async_op)
        if self.op == "reduce_scatter":
            x, y = buf(n), buf(n // g)
            return lambda: scatter(y, x, group=pg, async_op=async_op)
        if self.op == "all_to_all":
            x, y = buf(n), buf(n)
            return lambda: dist.all_to_all_single(y, x, group=pg, async_op=async_op)
        x = buf(n)  # send_recv: rank 0 sends to rank 1
        return (lambda: dist.send(x, dst=1)) if self.rank == 0 else (lambda: dist.recv(x, src=0))

    def align(self) -> None:
        import torch
        import torch.distributed as dist

        dist.all_reduce(torch.zeros(1, device=self.device), group=self.pg)

    def run(self, repeats: int) -> np.ndarray:
        clock = Clock(self.device.type == "cuda")
        fn = self.call()
        inner = 1 if self.nbytes >= MIB else 5

        def burst() -> None:
            for _ in range(inner):
                fn()

        for _ in range(3):
            fn()
        out = np.empty(repeats)
        for i in range(repeats):
            self.align()
            out[i] = clock.seconds(burst) / inner
        return out


def overlap_case(case: CollectiveCase, mnk: tuple[int, int, int], repeats: int
                 ) -> dict[str, object]:
    """GEMM alone, GEMM under the collective, collective alone, both together (module doc)."""
    import torch

    clock = Clock(case.device.type == "cuda")
    m, n, k = mnk
    a = torch.randn(m, k, device=case.device, dtype=dtype_of(case.device))
    b = torch.randn(k, n, device=case.device, dtype=dtype_of(case.device))
    coll, launch = case.call(), case.call(async_op=True)
    one = [clock.seconds(lambda: a @ b) for _ in range(5)]
    alone_c = [clock.seconds(coll) for _ in range(3)]
    # A burst as long as the collective alone, so the GEMMs see it in flight throughout.
    burst = int(np.clip(np.ceil(np.median(alone_c) / max(np.median(one), 1e-7)), 1, 200))

    def gemms() -> None:
        for _ in range(burst):
            a @ b

    def start(into: list[Any]) -> None:
        into.append(launch())

    def together() -> None:
        work = launch()
        gemms()
        work.wait()

    kernel, under, collective, both = (np.empty(repeats) for _ in range(4))
    for i in range(repeats):
        case.align()
        kernel[i] = clock.seconds(gemms) / burst
        case.align()
        collective[i] = clock.seconds(coll)
        case.align()
        both[i] = clock.seconds(together)
        case.align()
        work: list[Any] = []
        under[i] = clock.seconds(gemms, setup=partial(start, work)) / burst
        work[0].wait()
    keys = ("kernel_s", "kernel_under_s", "collective_s", "both_s")
    out: dict[str, object] = {"burst": burst, "gemm": list(mnk)}
    for key, times in zip(keys, (kernel, under, collective, both), strict=True):
        out[key] = float(np.median(slowest_times(times, case.device)))
    return out


def run_collectives(plan: CollectivePlan, cuda: bool
                    ) -> tuple[list[Sample], list[Interference]]:
    """Spawn the ranks (fork on a CPU: no torch re-import; spawn with CUDA, which cannot be
    forked once initialised) and turn rank 0's rows into samples and interference cases."""
    import torch.multiprocessing as mp
    from torch.multiprocessing.spawn import start_processes

    method = "fork" if not cuda and "fork" in mp.get_all_start_methods() else "spawn"
    start_processes(collective_worker, args=(plan,), nprocs=plan.world, start_method=method)
    got = json.loads(Path(plan.result).read_text())
    how = f"{SOURCE}: torch.distributed {plan.backend} world {plan.world}"
    samples = [
        Sample(op=r["op"], nbytes=float(r["nbytes"]), group=r["group"],
               gpus_per_node=r["group"], time=stats(r["times"]), source=how)
        for r in got["rows"]
    ]
    dtype = "bf16" if cuda else "fp32"
    overlaps = [
        Interference(
            kernel="gemm", m=r["gemm"][0], n=r["gemm"][1], k=r["gemm"][2], dtype=dtype,
            collective=r["op"], nbytes=float(r["nbytes"]), group=r["group"], burst=r["burst"],
            kernel_s=r["kernel_s"], kernel_under_s=r["kernel_under_s"],
            collective_s=r["collective_s"], both_s=r["both_s"], source=how,
        )
        for r in got["overlaps"]
    ]
    return samples, overlaps
