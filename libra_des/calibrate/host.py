"""Host (CPU) stages of MoE serving, measured as their serving stacks write them.

The stages (``sim.moe.host`` prices them) are written here as Python loops over torch CPU
tensors, one torch op per step, the way a serving stack's scheduler code runs them: the greedy
token moves (Libra's sharding, HarMoEny's moves), the replica placement (Libra's phase 2,
Lina's choice), and Lina's path-table lookup. Each is run on a representative input (the
paper's layer: 8 GPUs, 128 experts) and timed; its torch calls are counted with a
``TorchFunctionMode`` (every op, indexing and ``.item()`` included), so the structure model of
``sim.moe.host`` can be checked against these implementations (``tests/test_moe_cpu.py``).

The per-call costs come from micro-benchmarks on the same thread: a Python loop iteration of
the planning loop's shape, a torch op on an 8-element tensor (its dispatch overhead), and one
element of a vectorised op (a 1 M-element reduction less the small op, per element). Each is
the fastest of several timed repeats (the least disturbed by other load on the host, as
Python's ``timeit`` advises); the stage checks store measured beside modelled seconds.
A small device-host copy and the relaunch after a synchronisation need a GPU: they are
measured only with ``--device cuda``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from libra_des.hardware.profiles.profile import HostCheck, HostOverheads, Sourced

if TYPE_CHECKING:
    import torch

#: The representative layer: the paper's breakdown setting (8 GPUs, 128 experts, top-8,
#: 1024-token sequences, batch 32), with moves and replicas of the order the simulator plans.
GPUS, EXPERTS, TOP_K, TOKENS = 8, 128, 8, 32 * 1024
MOVES, REPLICAS, PER_GPU = 64, 32, 4
REPEATS = 7


def greedy_moves(counts: torch.Tensor, holders: torch.Tensor, moves: int) -> torch.Tensor:
    """``moves`` greedy moves over ``[G, E]`` remote pair counts: the most loaded GPU's largest
    expert share goes, halved, to the least-loaded GPU holding that expert."""
    import torch

    counts = counts.clone()
    loads = counts.sum(dim=1)
    for _ in range(moves):
        src = int(loads.argmax().item())
        expert = int(counts[src].argmax().item())
        dst = int(torch.where(holders[:, expert], loads, loads.max()).argmin().item())
        amount = int(counts[src, expert].item()) // 2
        counts[src, expert] -= amount
        counts[dst, expert] += amount
        loads[src] -= amount
        loads[dst] += amount
    return counts


def place_replicas(counts: torch.Tensor, holders: torch.Tensor, replicas: int,
                   per_gpu: int = 0) -> torch.Tensor:
    """Libra's phase 1 when ``per_gpu`` > 0 (each GPU's ``per_gpu`` most-requested experts it
    lacks, one vectorised top-k), then ``replicas`` replicas one per iteration: the hottest
    expert of the most loaded GPU to the least-loaded GPU without it (Libra's phase 2; Lina's
    replica choice)."""
    import torch

    holders = holders.clone()
    if per_gpu > 0:
        top = torch.topk(torch.where(holders, -1, counts), per_gpu, dim=1)
        holders.scatter_(1, top.indices, top.values > 0)
    loads = counts.sum(dim=1).to(torch.float64)
    for _ in range(replicas):
        src = int(loads.argmax().item())
        expert = int(counts[src].argmax().item())
        dst = int(torch.where(holders[:, expert], loads.max(), loads).argmin().item())
        holders[dst, expert] = True
        share = counts[:, expert].sum().item() / holders[:, expert].sum().item()
        loads[dst] += share
        loads[src] -= share
    return holders


def path_lookup(previous: torch.Tensor, table: torch.Tensor, experts: int) -> torch.Tensor:
    """Lina's lookup: the previous layer's expert histogram times the ``[E, E]`` path table,
    then the experts ranked by predicted load."""
    import torch

    hist = torch.bincount(previous.flatten(), minlength=experts).to(table.dtype)
    return torch.argsort(hist @ table, descending=True)


def count_ops(fn: Callable[[], object]) -> int:
    """Torch calls ``fn`` makes (tensor methods, indexing and ``.item()`` included)."""
    from torch.overrides import TorchFunctionMode

    class Counter(TorchFunctionMode):
        calls = 0

        def __torch_function__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            Counter.calls += 1
            return func(*args, **(kwargs or {}))

    with Counter():
        fn()
    return Counter.calls


def best_s(fn: Callable[[], object], repeats: int = REPEATS) -> float:
    """The fastest of ``repeats`` timed calls after a warm-up (allocations, first dispatch)."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def python_iteration_s(n: int = 200_000) -> float:
    """One iteration of a Python loop carrying a few local updates (the planning loop's
    glue outside its torch calls)."""
    def loop() -> int:
        acc = 0
        for i in range(n):
            acc += i & 7
        return acc

    return best_s(loop) / n


def torch_op_s(n: int = 500) -> float:
    """One torch op on an 8-element CPU tensor: the mean over the op kinds the planning loops
    call (a reduction, ``where``, indexing, ``.item()``, an in-place update of one element),
    each timed in a loop of its own and divided by its counted calls."""
    import torch

    x = torch.arange(8, dtype=torch.int64)
    mask = x > 3
    scalar = x[3]

    def inplace() -> None:
        x[1] += 0

    kinds: list[Callable[[], object]] = [
        x.argmax, x.max, lambda: torch.where(mask, x, scalar), lambda: x[3], scalar.item,
        inplace,
    ]
    per_op = []
    for kind in kinds:
        def loop(kind: Callable[[], object] = kind) -> None:
            for _ in range(n):
                kind()

        per_op.append(best_s(loop) / (n * count_ops(kind)))
    return float(np.mean(per_op))


def element_op_s(small: float, n: int = 1 << 20) -> float:
    """One element of a vectorised reduction: a 1 Mi-element argmax less one small op."""
    import torch

    big = torch.randint(0, 1 << 20, (n,), dtype=torch.int64)
    return max(best_s(big.argmax) - small, 0.0) / n


def inputs(rng: np.random.Generator) -> dict[str, Any]:
    """The representative layer's counts, holders, previous-layer experts and path table."""
    import torch

    counts = torch.from_numpy(rng.zipf(1.5, (GPUS, EXPERTS)).clip(max=4096).astype(np.int64))
    home = np.zeros((GPUS, EXPERTS), dtype=bool)
    home[np.arange(EXPERTS) * GPUS // EXPERTS, np.arange(EXPERTS)] = True
    home |= rng.random((GPUS, EXPERTS)) < 0.05
    previous = torch.from_numpy(rng.integers(0, EXPERTS, (TOKENS, TOP_K), dtype=np.int64))
    table = torch.from_numpy(rng.random((EXPERTS, EXPERTS)))
    return {"counts": counts, "holders": torch.from_numpy(home), "previous": previous,
            "table": table}


def stage_runs(data: dict[str, Any]) -> dict[str, Callable[[], object]]:
    """Every measured stage on ``data``, as the structure model names it."""
    c, h = data["counts"], data["holders"]
    return {
        "sharding_cpu": lambda: greedy_moves(c, h, MOVES),
        "replication_cpu": lambda: place_replicas(c, h, REPLICAS, PER_GPU),
        "prediction_cpu": lambda: path_lookup(data["previous"], data["table"], EXPERTS),
    }


def measure_host(cpu: str, seed: int = 0, cuda: bool = False) -> HostOverheads:
    """This host's per-call costs and every stage's measured and modelled seconds."""
    from libra_des.sim.moe.host import HostPrices, measured_stages

    where = f"measured by libra-des calibrate on {cpu}, one thread"
    py = python_iteration_s()
    op = torch_op_s()
    elem = element_op_s(op)
    host = HostOverheads(
        cpu=cpu,
        python_iteration_s=Sourced(value=py, source=f"{where}: a loop iteration (fastest of 7)"),
        torch_op_s=Sourced(value=op, source=f"{where}: a torch op on an 8-element tensor"),
        element_op_s=Sourced(value=elem, source=f"{where}: 1 Mi-element argmax per element"),
        **(device_copies(where) if cuda else {}),
    )
    prices = HostPrices.of(host)
    model = measured_stages(GPUS, EXPERTS, TOP_K, TOKENS, MOVES, REPLICAS, GPUS * PER_GPU)
    checks = tuple(
        HostCheck(stage=name, measured_s=max(best_s(run, 3), 1e-9),
                  modelled_s=max(prices.compute_seconds(model[name]), 1e-9))
        for name, run in stage_runs(inputs(np.random.default_rng(seed))).items()
    )
    return host.model_copy(update={"checks": checks})


def device_copies(where: str) -> dict[str, Sourced]:
    """A small D2H copy with its synchronisation, and a kernel launched right after one."""
    import torch

    x = torch.zeros(GPUS * EXPERTS, dtype=torch.int32, device="cuda")
    def relaunch_once() -> None:
        x.add_(0)
        torch.cuda.synchronize()

    copy = best_s(lambda: x.cpu(), 50)
    relaunch = best_s(relaunch_once, 50)
    return {"copy_s": Sourced(value=copy, source=f"{where}: a 4 KiB .cpu() copy"),
            "launch_s": Sourced(value=relaunch, source=f"{where}: one launch + synchronize")}
