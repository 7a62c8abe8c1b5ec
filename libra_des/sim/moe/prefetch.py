"""Generated routing batches made by a helper process while the simulation runs.

Generating a large run's routing (numpy and compiled kernels) and simulating it (SimPy, pure
Python) each take about half of a cold ``moe-qwen3-235b`` run, and neither needs the other's
results: the traces come from their own child stream, drawn before any policy decision. So a
helper process draws the batches, in order, from a copy of that stream exactly as the run's
own planner would (as ``simulator.shared_traces`` does for the on-disk cache) and hands each
over as soon as it is made; the run simulates batch ``b`` while batch ``b + 1`` is drawn.
Results are identical (the same draws, in the same order); only the wall time changes. CPU
time rises by the helper's start-up (a fresh interpreter: imports, about 1 s).

When (our choice): only for runs drawing at least ``sampling.COMPILED_UNIFORMS`` uniforms,
when the machine has a CPU to spare (one-minute load average at least 1.5 below the CPU count,
counting this run: on a busy machine the helper only adds its start-up), and not inside a
daemonic worker (those may not start processes). Sweeps share traces through the on-disk
cache instead (``workload.trace_cache``), so their runs never start a helper.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import queue
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from multiprocessing.context import SpawnProcess
from typing import Any, overload

import numpy as np

from libra_des.config import Scenario
from libra_des.sim.moe.batch import BatchPlanner
from libra_des.workload.routing import RoutingTrace
from libra_des.workload.sampling import COMPILED_UNIFORMS

#: Seconds between checks that the helper is still alive while waiting for a batch.
POLL_S = 1.0


def spare_cpus() -> float:
    """CPUs not busy over the last minute (the load average counts this run itself)."""
    return (os.cpu_count() or 1) - os.getloadavg()[0] + 1.0


def worthwhile(uniforms: int) -> bool:
    """Whether a run drawing ``uniforms`` should generate its batches in a helper process."""
    return (uniforms >= COMPILED_UNIFORMS and spare_cpus() >= 1.5
            and not multiprocessing.current_process().daemon)


def produce(scenario: Scenario, gpus: int, rng: np.random.Generator, out: Any) -> None:
    """The helper's work: every batch, in order, as the run's planner would draw them."""
    planner = BatchPlanner.build(scenario, gpus, rng)
    for b in range(planner.batches):
        out.put(planner.trace(b))


@dataclass
class PrefetchedTraces(Sequence[RoutingTrace]):
    """The batches as the helper delivers them (read in order; each is handed out once)."""

    size: int
    channel: Any
    process: SpawnProcess
    received: dict[int, RoutingTrace] = field(default_factory=dict)
    next_batch: int = 0

    def __len__(self) -> int:
        return self.size

    @overload
    def __getitem__(self, index: int) -> RoutingTrace: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[RoutingTrace]: ...

    def __getitem__(self, index: int | slice) -> RoutingTrace | Sequence[RoutingTrace]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self.size))]
        while self.next_batch <= index:
            self.received[self.next_batch] = self.receive()
            self.next_batch += 1
        return self.received.pop(index)

    def receive(self) -> RoutingTrace:
        while True:
            try:
                trace: RoutingTrace = self.channel.get(timeout=POLL_S)
                return trace
            except queue.Empty:
                if not self.process.is_alive():
                    raise RuntimeError("the routing-trace helper process stopped early") from None


@contextmanager
def prefetched(
    scenario: Scenario, gpus: int, rng: np.random.Generator, batches: int
) -> Iterator[PrefetchedTraces]:
    """Start the helper on a copy of ``rng`` (left untouched); stop it when the run ends."""
    context = multiprocessing.get_context("spawn")  # no fork of a threaded interpreter
    channel = context.Queue(maxsize=2)  # at most two batches ahead: bounded memory
    process = context.Process(target=produce, args=(scenario, gpus, rng, channel), daemon=True)
    process.start()
    try:
        yield PrefetchedTraces(batches, channel, process)
    finally:
        if process.is_alive():
            process.terminate()
        process.join()
        channel.close()


def attach(
    planner: BatchPlanner, start: np.random.Generator, gpus: int, stack: ExitStack,
    force: bool | None = None,
) -> BatchPlanner:
    """``planner`` reading its generated batches from a helper started on ``start`` (the
    planner's stream before it drew anything) and stopped by ``stack``; unchanged when the
    routing is not generated here, or the run is small (``force`` None) or ``force`` is False.
    """
    if planner.router is None or planner.source is not None or force is False:
        return planner
    w = planner.scenario.workload
    layers, _, experts = planner.router.gate.shape
    if force is None and not worthwhile(planner.batches * w.batch * w.seq_len * layers * experts):
        return planner
    lazy = stack.enter_context(prefetched(planner.scenario, gpus, start, planner.batches))
    return dataclasses.replace(planner, source=lazy)
