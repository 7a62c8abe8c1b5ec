"""Generated routing batches drawn by a thread of the run while its main thread simulates.

Generating a large run's routing and simulating it each take about half of a cold
``moe-qwen3-235b`` run, and neither needs the other's results: the batches come from their own
child stream (the planner's ``rng``), which nothing else draws from once the planner is built.
So a thread draws the batches, in order, from that stream exactly as the planner would, and
hands each over through a one-slot queue; the main thread simulates batch ``b`` while batch
``b + 1`` is drawn. Results are identical (the same draws, in the same order).

Why a thread helps: the generator's work is numpy's logs and sorts, BLAS products and ``nogil``
numba kernels, all of which release the GIL, so the two threads run on two CPUs for most of
the generation; unlike the helper process (``sim.moe.prefetch``) there is no second
interpreter to start (its imports) and nothing to pickle. The GIL is still taken
between those calls: the generator asks for it once per call (about 15 per 2,048-token
block), and a thread that waits for it gets it only after the holder's switch interval
(5 ms by default) unless the holder releases it first. The simulation thread releases it in
every numpy call of at least a few hundred elements, but not while SimPy runs (pure
Python, about half of the simulation's time), so the overlap is partial.

Measured (``benchmarks/moe_prefetch.py``, figures in benchmarks/README.md), the thread saves
little wall time for more CPU, and the benchmark's medians put it behind both other choices.
So it is opt-in (``prefetch="thread"``), and
:func:`serve`'s default stays the helper process where a CPU is spare, else drawing in the run.

Memory: at most two batches ahead of the simulation (one in the queue, one being drawn).
An exception in the thread is raised in the main thread when it asks for that batch.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from libra_des.sim.moe.batch import BatchPlanner
from libra_des.sim.moe.prefetch import InOrder, attach
from libra_des.workload.routing import RoutingTrace

#: ``run_moe``'s ``prefetch``: how generated batches are drawn (see :func:`serve`).
Prefetch = bool | Literal["thread", "process"] | None

#: Seconds between checks of the stop flag while the queue is full (our choice: a stopped
#: run waits at most this long for the thread to notice).
POLL_S = 0.05


@dataclass
class ThreadedTraces(InOrder):
    """The batches as the drawing thread delivers them (read in order; each handed out once)."""

    size: int
    channel: queue.Queue[RoutingTrace | BaseException]
    received: dict[int, RoutingTrace] = field(default_factory=dict)
    next_batch: int = 0

    def receive(self) -> RoutingTrace:
        item = self.channel.get()
        if isinstance(item, BaseException):
            raise item
        return item


def draw_all(
    planner: BatchPlanner, channel: queue.Queue[RoutingTrace | BaseException],
    stop: threading.Event,
) -> None:
    """The thread's work: every batch in order, each put in ``channel`` (or the error that
    ended it); gives up as soon as ``stop`` is set."""

    def hand(item: RoutingTrace | BaseException) -> bool:
        while not stop.is_set():
            try:
                channel.put(item, timeout=POLL_S)
                return True
            except queue.Full:
                continue
        return False

    try:
        for b in range(planner.batches):
            if not hand(planner.trace(b)):
                return
    except BaseException as exc:  # handed to the main thread, which raises it
        hand(exc)


@contextmanager
def threaded(planner: BatchPlanner) -> Iterator[BatchPlanner]:
    """``planner`` reading its generated batches from a drawing thread (started here, stopped
    when the block ends); the thread draws from the planner's own stream, which the run
    itself no longer touches."""
    channel: queue.Queue[RoutingTrace | BaseException] = queue.Queue(maxsize=1)
    stop = threading.Event()
    worker = threading.Thread(target=draw_all, args=(planner, channel, stop),
                              name="moe-traces", daemon=True)
    worker.start()
    try:
        yield dataclasses.replace(planner, source=ThreadedTraces(planner.batches, channel))
    finally:
        stop.set()
        worker.join()


def serve(
    planner: BatchPlanner, start: np.random.Generator, gpus: int, stack: ExitStack,
    prefetch: Prefetch,
) -> BatchPlanner:
    """``planner`` with its generated batches drawn ahead as ``prefetch`` says: ``"thread"``
    (:func:`threaded`), True or ``"process"`` (``prefetch.attach``; ``start``: the stream
    before the planner drew), False: in the run. None: a helper process where a CPU is
    spare and the run is large (``prefetch.worthwhile``), else in the run.
    Runs without generated batches (traces given or read from a file) are left as they are.
    """
    if planner.router is None or planner.source is not None or prefetch is False:
        return planner
    if prefetch == "thread":
        return stack.enter_context(threaded(planner))
    force = None if prefetch is None else True
    return attach(planner, start, gpus, stack, force)
