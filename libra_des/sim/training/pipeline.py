"""SimPy execution of a pipeline schedule over pipeline entities (fast fidelity).

Each (entity, device) pair is one SimPy process that walks its op order: it waits for the op's
input (the previous virtual stage's activation or the next one's gradient, plus the
point-to-point transfer time), then stays busy for the op's precomputed duration. Waiting is a
counter check plus at most one event per dependency, so a step costs O(ops) events.

After its last op a device joins the gradient synchronisation of its stage: one shared event
fires when every entity has finished (a counter, not ``AllOf``), and the bucketed collective
timeline is then computed in closed form (buckets overlap the tail of the backward pass).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import simpy

from libra_des.sim.training.schedules import Op, Schedule

#: Simulation events between two progress-hook calls (our choice: rare enough to cost
#: nothing measurable, often enough for a bar to move several times a second).
WATCH_EVERY = 4096


@dataclass
class Counters:
    """Conservation bookkeeping filled in while the processes run."""

    p2p_sent: float = 0.0
    p2p_received: float = 0.0
    executed: dict[tuple[int, int, str, int], int] = field(default_factory=dict)


@dataclass(frozen=True)
class PipelineRun:
    """Start/finish times of every op, and per-device end of gradient sync."""

    start: np.ndarray  # [E, p, n]
    finish: np.ndarray  # [E, p, n]
    ran: np.ndarray  # [E, p, n] times each op was executed
    sync_end: np.ndarray  # [p]
    sync_exposed: np.ndarray  # [p] sync time after the last entity's backward
    sync_hidden: np.ndarray  # [p]
    buckets: tuple[tuple[tuple[float, float], ...], ...]  # per device (start, end)
    events: int
    counters: Counters


def dependencies(schedule: Schedule) -> list[list[tuple[int, int] | None]]:
    """For each device and op index, the (device, op index) it waits for."""
    index = [{op: i for i, op in enumerate(order)} for order in schedule.orders]
    deps: list[list[tuple[int, int] | None]] = []
    for d, order in enumerate(schedule.orders):
        row: list[tuple[int, int] | None] = []
        for op in order:
            dep = schedule.dependency(d, op)
            row.append(None if dep is None else (dep[0], index[dep[0]][dep[1]]))
        deps.append(row)
    return deps


def consumers_of(
    deps: list[list[tuple[int, int] | None]],
) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """(device, op index) -> the ops on other devices that consume its output."""
    out: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for d, row in enumerate(deps):
        for i, dep in enumerate(row):
            if dep is not None and dep[0] != d:
                out.setdefault(dep, []).append((d, i))
    return out


SyncFn = Callable[[int, np.ndarray, np.ndarray], tuple[list[tuple[float, float]], float]]


class PipelineSim:
    """Builds the processes for one step and runs them to completion."""

    def __init__(
        self,
        schedule: Schedule,
        durations: list[np.ndarray],
        p2p_seconds: float | np.ndarray,
        p2p_bytes: float,
        sync: SyncFn,
    ) -> None:
        self.schedule = schedule
        self.env = simpy.Environment()
        self.dur = [d.tolist() for d in durations]  # per device [E][n]
        self.entities = durations[0].shape[0]
        p, n = schedule.stages, len(schedule.orders[0])
        # [src device, dst device] hand-off seconds (a scalar applies to every boundary).
        self.p2p_s = (np.zeros((p, p)) + np.asarray(p2p_seconds, dtype=float)).tolist()
        self.p2p_bytes = p2p_bytes
        self.sync = sync
        self.deps = dependencies(schedule)
        self.consumers = consumers_of(self.deps)
        self.start = np.full((self.entities, p, n), np.nan)
        self.ran = np.zeros((self.entities, p, n), dtype=np.int64)
        self.fin: list[list[list[float | None]]] = [
            [[None] * len(o) for o in schedule.orders] for _ in range(self.entities)
        ]
        self.waiters: dict[tuple[int, int, int], simpy.Event] = {}
        self.counters = Counters()
        self.done = [0] * p
        self.all_done = [self.env.event() for _ in range(p)]
        self.sync_out: list[tuple[list[tuple[float, float]], float]] = [([], 0.0)] * p
        #: Called every WATCH_EVERY events with (simulated seconds, share of ops finished):
        #: a progress bar's hook; it never changes what is simulated.
        self.watch: Callable[[float, float], None] | None = None
        self.ops_done = 0

    def device(self, e: int, d: int) -> Generator[Any, Any, None]:
        env, fin, order = self.env, self.fin[e], self.schedule.orders[d]
        for i, op in enumerate(order):
            dep = self.deps[d][i]
            if dep is not None:
                yield from self.wait_for(e, d, i, dep)
            self.start[e, d, i] = env.now
            self.ran[e, d, i] += 1
            self.record(e, d, op)
            yield from self.execute(e, d, i)
            fin[d][i] = env.now
            self.ops_done += 1
            self.finished(e, d, i)
        self.done[d] += 1
        if self.done[d] == self.entities:
            self.all_done[d].succeed()

    def execute(self, e: int, d: int, i: int) -> Generator[Any, Any, None]:
        """Busy for the op's precomputed duration (the detailed mode replays its parts)."""
        yield self.env.timeout(self.dur[d][e][i])

    def finished(self, e: int, d: int, i: int) -> None:
        """Wake ops waiting on this one; its output leaves for each consumer on another stage."""
        ev = self.waiters.pop((e, d, i), None)
        if ev is not None:
            ev.succeed()
        self.counters.p2p_sent += self.p2p_bytes * len(self.consumers.get((d, i), ()))

    def wait_for(
        self, e: int, d: int, i: int, dep: tuple[int, int]
    ) -> Generator[Any, Any, None]:
        """Wait until op ``i`` of device ``d`` has its input (producer done + p2p time)."""
        dd, ii = dep
        t = self.fin[e][dd][ii]
        if t is None:
            ev = self.waiters.get((e, dd, ii))
            if ev is None:
                ev = self.waiters[(e, dd, ii)] = self.env.event()
            yield ev
            t = self.fin[e][dd][ii]
            assert t is not None
        if dd != d:
            # The producer sent when it finished; the consumer receives after the transfer.
            self.counters.p2p_received += self.p2p_bytes
            t += self.p2p_s[dd][d]
        if t > self.env.now:
            yield self.env.timeout(t - self.env.now)

    def record(self, e: int, d: int, op: Op) -> None:
        key = (e, self.schedule.virtual_stage(d, op), op.kind, op.microbatch)
        self.counters.executed[key] = self.counters.executed.get(key, 0) + 1

    def grad_sync(self, d: int) -> Generator[Any, Any, None]:
        yield self.all_done[d]
        start = self.start[:, d, :]
        fin = np.array([[f for f in self.fin[e][d]] for e in range(self.entities)], dtype=float)
        buckets, end = self.sync(d, start, fin)
        self.sync_out[d] = (buckets, end)
        if end > self.env.now:
            yield self.env.timeout(end - self.env.now)

    def run(self) -> PipelineRun:
        p = self.schedule.stages
        for e in range(self.entities):
            for d in range(p):
                self.env.process(self.device(e, d))
        for d in range(p):
            self.env.process(self.grad_sync(d))
        events = 0
        total = max(self.entities * sum(len(o) for o in self.schedule.orders), 1)
        while True:
            try:
                self.env.step()
            except simpy.core.EmptySchedule:
                break
            events += 1
            if self.watch is not None and events % WATCH_EVERY == 0:
                self.watch(float(self.env.now), self.ops_done / total)
        finish = np.array(self.fin, dtype=float)
        last_b = np.nanmax(finish, axis=(0, 2))
        ends = np.array([out[1] for out in self.sync_out])
        total = np.array([sum(b - a for a, b in out[0]) for out in self.sync_out])
        exposed = np.maximum(ends - last_b, 0.0)
        return PipelineRun(
            start=self.start,
            finish=finish,
            ran=self.ran,
            sync_end=ends,
            sync_exposed=exposed,
            sync_hidden=np.maximum(total - exposed, 0.0),
            buckets=tuple(tuple(out[0]) for out in self.sync_out),
            events=events,
            counters=self.counters,
        )
