"""Generated routing batches made by a helper process while the simulation runs.

Generating a large run's routing (numpy and numba kernels) and simulating it (SimPy, pure
Python) each take about half of a cold ``moe-qwen3-235b`` run, and neither needs the other's
results: the traces come from their own child stream, drawn before any policy decision. So a
helper process draws the batches, in order, from a copy of that stream exactly as the run's
own planner would (as ``simulator.shared_traces`` does for the on-disk cache) and hands each
over as soon as it is made; the run simulates batch ``b`` while batch ``b + 1`` is drawn.
Results are identical (the same draws, in the same order); only the wall time changes. CPU
time rises by the helper's start-up where it is spawned (a fresh interpreter: its imports).

When (our choice): only for runs drawing at least :data:`PREFETCH_UNIFORMS` uniforms,
when the machine has a CPU to spare (one-minute load average at least 1.5 below the CPU count,
counting this run: on a busy machine the helper only adds its start-up), and not inside a
daemonic worker. Sweeps share traces through the on-disk cache instead
(``workload.trace_cache``), so their runs never start a helper.

The helper is a fork of the run's process on Linux when no other thread runs (it starts
with every module imported and the stream's state in place), else a fresh
``python -m libra_des.sim.moe.prefetch`` on the same module path with its inputs pickled on
its stdin; not a ``multiprocessing`` child: spawning one re-imports the caller's main script,
which runs it again when the script has no ``if __name__ == "__main__"`` guard. Each batch
comes back as ``.npy`` arrays on a pipe (its buffer holds the helper back to about one batch
ahead: bounded memory). Should the helper fail, the run draws the batches itself from another
copy of the stream (same results, no time saved).
"""

from __future__ import annotations

import copy
import dataclasses
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import IO, overload

import numpy as np

from libra_des.config import MoeScenario as Scenario
from libra_des.sim.moe.batch import BatchPlanner
from libra_des.workload.routing import RoutingTrace

#: Uniforms a run must draw before a helper process pays for its start-up: the helper's
#: imports against the time a uniform saves by overlapping generation with the simulation
#: (both measured on the 2-core CI machine, Qwen3-235B batches; figures in
#: benchmarks/README.md); 2**29 leaves a 2x margin (our choice).
PREFETCH_UNIFORMS = 1 << 29
#: The arrays of one batch, in the order they travel (the experts layer-major, as they are
#: generated and read).
FIELDS = ("by_layer", "request", "dataset", "num_experts")


@dataclass(frozen=True)
class Stream:
    """A pipe as a plain stream: numpy's ``.npy`` reader and writer ask a real file for its
    position (``fromfile``/``tofile``), which a pipe cannot give; through ``read``/``write``
    they stream."""

    pipe: IO[bytes]

    def read(self, size: int = -1) -> bytes:
        return self.pipe.read(size)

    def write(self, data: bytes) -> int:
        return self.pipe.write(data)


def spare_cpus() -> float:
    """CPUs not busy over the last minute (the load average counts this run itself); none
    where the platform keeps no load average."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0
    return (os.cpu_count() or 1) - load + 1.0


def worthwhile(uniforms: int) -> bool:
    """Whether a run drawing ``uniforms`` should generate its batches in a helper process."""
    return (uniforms >= PREFETCH_UNIFORMS and spare_cpus() >= 1.5
            and not multiprocessing.current_process().daemon)


def produce(source: IO[bytes], out: IO[bytes]) -> None:
    """The spawned helper's work: its inputs from ``source``, then :func:`draw_into`."""
    scenario, gpus, rng = pickle.load(source)
    draw_into(BatchPlanner.build(scenario, gpus, rng, draws_only=True), out)


def draw_into(planner: BatchPlanner, out: IO[bytes]) -> None:
    """Every batch, in order, as the run's planner would draw them, written to ``out``."""
    for b in range(planner.batches):
        trace = planner.trace(b)
        for name in FIELDS:
            np.lib.format.write_array(Stream(out), np.asarray(getattr(trace, name)),
                                      allow_pickle=False)
        out.flush()


class InOrder(Sequence[RoutingTrace]):
    """Batches delivered in order by a producer (:meth:`receive`), each handed out once;
    the subclass keeps ``size``, ``received`` (delivered, not yet asked for) and
    ``next_batch``."""

    size: int
    received: dict[int, RoutingTrace]
    next_batch: int

    def receive(self) -> RoutingTrace:
        raise NotImplementedError

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


@dataclass
class PrefetchedTraces(InOrder):
    """The batches as the helper delivers them (read in order; each is handed out once)."""

    size: int
    channel: IO[bytes]
    #: Draws the batches here instead (from the same stream) should the helper fail.
    local: Callable[[], BatchPlanner]
    received: dict[int, RoutingTrace] = field(default_factory=dict)
    next_batch: int = 0
    fallback: BatchPlanner | None = None

    def receive(self) -> RoutingTrace:
        """The next batch from the helper; should it fail (a short read), the same batch
        drawn here, after redrawing the ones before it (the stream has no other way there)."""
        if self.fallback is None:
            try:
                arrays = [np.lib.format.read_array(Stream(self.channel), allow_pickle=False)
                          for _ in FIELDS]
                by_layer, request, dataset, num_experts = arrays
                return RoutingTrace.of_layers(by_layer, request, dataset, int(num_experts))
            except (ValueError, EOFError, OSError):
                self.fallback = self.local()
                for b in range(self.next_batch):
                    self.fallback.trace(b)
        return self.fallback.trace(self.next_batch)


def forkable() -> bool:
    """Whether the helper can be a fork of this process: Linux, and no other thread running
    (a fork copies only the calling thread, so a lock another thread holds would stay held
    in the helper)."""
    return sys.platform.startswith("linux") and threading.active_count() == 1


@contextmanager
def forked(scenario: Scenario, gpus: int, rng: np.random.Generator) -> Iterator[IO[bytes]]:
    """The batches' channel from a fork of this process, which already holds every module
    and ``rng``'s state at the fork: no start-up to pay (a spawned helper's imports cost
    about 0.7 s of CPU, benchmarks/README.md)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the helper: it never returns into the run's code
        code = 1
        try:
            os.close(read_fd)
            with os.fdopen(write_fd, "wb") as out:
                draw_into(BatchPlanner.build(scenario, gpus, rng, draws_only=True), out)
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    channel = os.fdopen(read_fd, "rb")
    try:
        yield channel
    finally:
        os.kill(pid, signal.SIGKILL)  # done or abandoned: nothing more is read
        os.waitpid(pid, 0)
        channel.close()


@contextmanager
def spawned(scenario: Scenario, gpus: int, rng: np.random.Generator) -> Iterator[IO[bytes]]:
    """The batches' channel from a fresh interpreter, its inputs pickled on its stdin."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    process = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, env=env)
    assert process.stdin is not None and process.stdout is not None
    try:
        try:
            with process.stdin:
                pickle.dump((scenario, gpus, rng), process.stdin)
        except OSError:  # the helper is gone already: the batches are drawn here
            pass
        yield process.stdout
    finally:
        process.kill()  # done or abandoned: nothing more is read
        process.wait()
        process.stdout.close()


@contextmanager
def prefetched(
    scenario: Scenario, gpus: int, rng: np.random.Generator, batches: int
) -> Iterator[PrefetchedTraces]:
    """Start the helper (:func:`forked` where :func:`forkable`, else :func:`spawned`) on a
    copy of ``rng`` (left untouched); stop it when the run ends."""
    helper = forked if forkable() else spawned
    with helper(scenario, gpus, rng) as channel:
        yield PrefetchedTraces(batches, channel,
                               lambda: BatchPlanner.build(scenario, gpus, copy.deepcopy(rng),
                                                          draws_only=True))


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


if __name__ == "__main__":  # the helper process
    produce(sys.stdin.buffer, sys.stdout.buffer)
