"""SimPy execution of one MoE prefill layer as a graph of stages, with link contention.

Assumptions:

* Every compute stage's solo duration is known up front (costed from the plan); the only
  dynamic interaction is on the network. A communication stage carries its
  :class:`~libra_des.sim.network.model.Traffic` and the run's network model
  (:class:`~libra_des.sim.network.model.NetworkModel`) times it. At ``fast`` fidelity that is
  the alpha-beta model on one :class:`SharedLink` per GPU (its NVLink / PCIe / NIC port): a
  collective (dispatch, combine) puts one job of its solo duration on every member's link and
  ends when the last finishes; jobs on a link share it equally (processor sharing), so replica
  copies on the copy engine stretch a dispatch or combine they overlap with, and vice versa.
  At ``detailed`` fidelity the traffic runs as flows on the topology
  (:mod:`libra_des.sim.network.flow.flow_model`).
* A stage starts when all its dependencies have ended (GPU streams, barriers and data
  dependencies are all expressed as dependencies). Stages are callbacks on SimPy events, not
  processes: a stage begins from its last dependency's callback, and its end is a timeout's
  or its traffic's (the same simulated times a process would give, in fewer events).

Exposed / hidden time comes from the layer's critical path: walking back from the layer's last
stage through the latest-ending dependency, each stage on the path is exposed for its whole
interval; a stage that began in an earlier layer (a replica copy prefetched one layer ahead) is
exposed only for how long it delayed its successor beyond the other dependencies. Everything
else a stage took is hidden.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

import simpy

from libra_des.sim.network.model import NetworkModel, Traffic


class CountingEnvironment(simpy.Environment):
    """A SimPy environment that counts the events it processes (and, with interference on,
    carries the run's :class:`Contention`)."""

    def __init__(self) -> None:
        super().__init__()
        self.processed = 0
        self.contention: Contention | None = None

    def step(self) -> None:
        self.processed += 1
        super().step()


class SharedLink:
    """Processor sharing of one port: ``n`` active jobs each progress at ``1/n`` speed.

    A job's work is its solo duration in seconds. One waiter process reacts to job arrivals
    and completions (the next completion is recomputed on every change).
    """

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.jobs: dict[int, list[Any]] = {}  # id -> [remaining work, done event]
        self.next_id = 0
        self.last = 0.0
        self.changed = env.event()
        env.process(self.run())

    def transfer(self, work: float) -> simpy.Event:
        """Event that fires when ``work`` solo-seconds have been served."""
        done = self.env.event()
        if work <= 0:
            done.succeed()
            return done
        self.advance()
        self.jobs[self.next_id] = [work, done]
        self.next_id += 1
        if not self.changed.triggered:
            self.changed.succeed()
        return done

    def advance(self) -> None:
        now = self.env.now
        if self.jobs:
            served = (now - self.last) / len(self.jobs)
            for job in self.jobs.values():
                job[0] -= served
        self.last = now

    def run(self) -> Generator[simpy.Event, Any, None]:
        while True:
            if not self.jobs:
                yield self.changed
            else:
                soonest = min(job[0] for job in self.jobs.values()) * len(self.jobs)
                yield self.env.timeout(max(soonest, 0.0)) | self.changed
            if self.changed.triggered:
                self.changed = self.env.event()
            self.advance()
            for key in [k for k, job in self.jobs.items() if job[0] <= 1e-15]:
                self.jobs.pop(key)[1].succeed()


#: Communication stages that move data on the copy engine (no SM held; NVLink still shared).
COPY_ENGINE_STAGES = ("replica_copy",)


class Contention:
    """Compute stages beside SM-holding communication (``overlap.interference: on``).

    While any dispatch or combine is in flight (they are group-wide: every GPU of the EP
    group runs its kernel), a compute stage progresses at ``1 / kernel`` of its solo speed
    (``hardware/compute/interference.py``): Libra's two-stage windows (local experts beside the
    dispatch), shared experts beside combine. Replica copies run on the copy engine and hold
    no SM. ``slowed_s`` sums the seconds compute stages took beyond their solo work.
    """

    def __init__(self, env: simpy.Environment, kernel: float) -> None:
        self.env = env
        self.kernel = kernel
        self.active = 0
        self.changed = env.event()
        self.slowed_s = 0.0

    def holds_sms(self, stage: Stage) -> bool:
        return stage.traffic is not None and stage.name not in COPY_ENGINE_STAGES

    def toggle(self, delta: int) -> None:
        self.active += delta
        if not self.changed.triggered:
            self.changed.succeed()
        self.changed = self.env.event()

    def serve(self, work: float, then: Callable[[], None]) -> None:
        """Serve ``work`` solo seconds at the speed the in-flight communication leaves, then
        call ``then``. Each segment lasts until its timeout or the next change of the
        in-flight count, whichever is processed first; the other is then stale."""
        env, began = self.env, self.env.now

        def segment(left: float) -> None:
            if left <= 1e-15:
                self.slowed_s += max(env.now - began - work, 0.0)
                then()
                return
            rate = 1.0 / self.kernel if self.active else 1.0
            t0, done, changed = env.now, env.timeout(left / rate), self.changed
            live = True

            def ended(_: simpy.Event) -> None:
                nonlocal live
                if live:
                    live = False
                    segment(0.0)

            def moved(_: simpy.Event) -> None:
                nonlocal live
                if live:
                    live = False
                    segment(left - (env.now - t0) * rate)

            done.callbacks.append(ended)
            after(changed, moved)

        segment(work)


@dataclass(eq=False)
class Stage:
    """One node of a layer's stage graph (``gpu`` is None for group-wide stages)."""

    name: str
    gpu: int | None
    work: float  # solo seconds on the GPU or the CPU (0 for a communication stage)
    deps: list[Stage] = field(default_factory=list)
    traffic: Traffic | None = None  # what a communication stage moves over the network
    #: Kernels run back to back inside a compute stage, ``(name, solo seconds)`` in stream
    #: order (one SimPy timeout for all; traces and breakdowns list each kernel).
    parts: tuple[tuple[str, float], ...] = ()
    start: float = -1.0
    end: float = -1.0
    done: simpy.Event | None = None

    @property
    def duration(self) -> float:
        return self.end - self.start

    def pieces(self) -> list[tuple[str, float, float]]:
        """``(name, start, end)`` of every kernel of the stage (the stage itself without
        parts); parts split the stage's interval in proportion to their solo seconds."""
        total = sum(p[1] for p in self.parts)
        if not self.parts or total <= 0:
            return [(self.name, self.start, self.end)]
        out, at, scale = [], self.start, self.duration / total
        for name, seconds in self.parts:
            out.append((name, at, at + seconds * scale))
            at += seconds * scale
        return out


def launch(env: simpy.Environment, stage: Stage, net: NetworkModel | None) -> simpy.Event:
    """Start ``stage`` once its dependencies are done; returns its done event.

    Callbacks, not a SimPy process: a stage counts its dependencies still to finish and
    begins from the last one's callback, at the same simulated time as a process waiting on
    ``AllOf`` would (without its start, condition and end events)."""
    stage.done = env.event()
    pending = [d.done for d in stage.deps if d.done is not None and not d.done.processed]
    if not pending:
        begin(env, stage, net)
        return stage.done
    left = len(pending)

    def arrived(_: simpy.Event) -> None:
        nonlocal left
        left -= 1
        if left == 0:
            begin(env, stage, net)

    for event in pending:
        event.callbacks.append(arrived)
    return stage.done


def begin(env: simpy.Environment, stage: Stage, net: NetworkModel | None) -> None:
    """Run ``stage`` from now: its traffic on the network, or its work on the GPU (slowed by
    in-flight communication when the run has a :class:`Contention`) or the CPU."""
    stage.start = env.now
    cont: Contention | None = getattr(env, "contention", None)

    def finish() -> None:
        stage.end = env.now
        assert stage.done is not None
        stage.done.succeed()

    if stage.traffic is not None:
        assert net is not None, "a communication stage needs a network model"
        held = cont is not None and cont.holds_sms(stage)
        if held and cont is not None:
            cont.toggle(1)

        def moved(_: simpy.Event) -> None:
            if held and cont is not None:
                cont.toggle(-1)
            finish()

        after(stage.traffic.start(net), moved)
    elif stage.work > 0 and cont is not None and stage.gpu is not None:
        cont.serve(stage.work, finish)
    elif stage.work > 0:
        env.timeout(stage.work).callbacks.append(lambda _: finish())
    else:
        finish()


def after(event: simpy.Event, callback: Callable[[simpy.Event], None]) -> None:
    """Call ``callback`` when ``event`` is processed (now, if it has been already)."""
    if event.callbacks is None:
        callback(event)
    else:
        event.callbacks.append(callback)


def expose(exposed: dict[str, float], stage: Stage) -> None:
    """Add the whole of ``stage`` (each of its kernels) to ``exposed``."""
    for name, start, end in stage.pieces():
        exposed[name] = exposed.get(name, 0.0) + (end - start)


def critical_exposure(last: Stage, layer_start: float) -> dict[str, float]:
    """Seconds each stage (or kernel) name spends on the critical path ending at ``last``."""
    exposed: dict[str, float] = {}
    node: Stage | None = last
    while node is not None:
        deps = sorted(node.deps, key=lambda d: d.end)
        crit = deps[-1] if deps else None
        if crit is not None and crit.start < layer_start:
            # Prefetched in an earlier layer: exposed only for the extra wait it caused.
            other = deps[-2].end if len(deps) > 1 else layer_start
            exposed[crit.name] = exposed.get(crit.name, 0.0) + max(crit.end - other, 0.0)
            expose(exposed, node)
            node = deps[-2] if len(deps) > 1 else None
            continue
        expose(exposed, node)
        node = crit
    return exposed


def stage_spans(stages: Sequence[Stage], layer_start: float) -> dict[str, float]:
    """Per stage name, the busiest GPU's total time in it (group stages count as one GPU)."""
    per_gpu: dict[tuple[str, int | None], float] = {}
    for s in stages:
        for name, start, end in s.pieces():
            length = end - max(start, layer_start) if end > layer_start else 0.0
            per_gpu[name, s.gpu] = per_gpu.get((name, s.gpu), 0.0) + length
    spans: dict[str, float] = {}
    for (name, _), total in per_gpu.items():
        spans[name] = max(spans.get(name, 0.0), total)
    return spans
