"""A training step's pipeline schedule over pipeline entities: the timeline of every op.

At fast fidelity (:class:`PipelineSim`) every op's duration is known before the step runs,
so the timeline is a recurrence over the ops in dependency order, computed for all entities
at once. The detailed mode (``sim.training.detailed``) times ops as they run on the network
model, so it walks the same schedule as SimPy processes (:class:`EventPipelineSim`).

After its last op a device joins the gradient synchronisation of its stage once every
entity has finished; the bucketed collective timeline is then computed in closed form
(buckets overlap the tail of the backward pass).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import simpy

from libra_des.base.kernel import Floats
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
#: A device's gradient synchronisation as ``sync`` returns it: (bucket intervals, end).
Synced = tuple[list[tuple[float, float]], float]


class Pipeline(ABC):
    """One step's pipeline over precomputed op durations: the schedule, its dependencies
    and hand-offs, the gradient synchronisation and the conservation counters."""

    def __init__(
        self,
        schedule: Schedule,
        durations: list[np.ndarray],
        p2p_seconds: float | np.ndarray,
        p2p_bytes: float,
        sync: SyncFn,
    ) -> None:
        self.schedule = schedule
        self.durations = durations
        self.entities = durations[0].shape[0]
        p = schedule.stages
        # [src device, dst device] hand-off seconds (a scalar applies to every boundary).
        self.p2p_s = (np.zeros((p, p)) + np.asarray(p2p_seconds, dtype=float)).tolist()
        self.p2p_bytes = p2p_bytes
        self.sync = sync
        self.deps = dependencies(schedule)
        self.consumers = consumers_of(self.deps)
        self.counters = Counters()
        #: Called with (simulated seconds, share of ops finished) as the run goes: a progress
        #: bar's hook; it never changes what is simulated.
        self.watch: Callable[[float, float], None] | None = None

    @abstractmethod
    def run(self) -> PipelineRun:
        """Every op's start and finish, and each device's gradient synchronisation."""


class PipelineSim(Pipeline):
    """One step's pipeline at fast fidelity: every op's start and finish by a recurrence.

    An op's duration is fixed before the step runs, so its start is the later of its
    device's previous finish and its input's arrival (the producer's finish, plus the
    hand-off time across stages), and the whole timeline follows from one walk of the ops
    in dependency order, every pipeline entity at once (one numpy operation over the
    entities per op). Each start and finish is the float SimPy would compute (``now +
    (arrival - now)`` for a wait, ``start + duration``): :class:`EventPipelineSim`, the same
    walk as SimPy processes, gives the same arrays bit for bit (tests/test_schedules.py).
    The hand-off counters are products here and running sums there: equal for whole-byte
    activations, else within rounding. ``events`` counts one per op and one per gradient
    synchronisation.
    """

    def run(self) -> PipelineRun:
        start, finish, ran = self.walk()
        self.count(ran)
        synced = self.synchronise(start, finish, ran)
        events = int(ran.sum()) + sum(1 for out in synced if out is not None)
        return assemble(start, finish, ran, synced, events, self.counters)

    def walk(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(start, finish, ran) ``[E, p, n]``: each device takes its ops in order while
        their inputs are done; an op whose input never comes stays unrun (NaN, 0)."""
        order = self.schedule.orders
        e_count, p, n = self.entities, self.schedule.stages, len(order[0])
        start = np.full((e_count, p, n), np.nan)
        finish = np.full((e_count, p, n), np.nan)
        ran = np.zeros((e_count, p, n), dtype=np.int64)
        done = np.zeros((p, n), dtype=bool)
        dur = [np.asarray(d, dtype=float) for d in self.durations]
        now = np.zeros((p, e_count))
        nxt = [0] * p
        watched = Watched(self.watch, e_count * sum(len(o) for o in order))
        moved = True
        while moved:
            moved = False
            for d in range(p):
                while nxt[d] < len(order[d]):
                    i, dep = nxt[d], self.deps[d][nxt[d]]
                    if dep is not None and not done[dep]:
                        break
                    at = now[d] if dep is None else self.arrival(finish, now[d], d, dep)
                    start[:, d, i] = at
                    now[d] = finish[:, d, i] = at + dur[d][:, i]
                    ran[:, d, i], done[d, i] = 1, True
                    nxt[d] += 1
                    moved = True
                    watched.add(now[d], e_count)
        return start, finish, ran

    def arrival(self, finish: Floats, now: Floats, d: int, dep: tuple[int, int]) -> Floats:
        """When device ``d``, free at ``now``, starts an op whose input is op ``dep``: it
        waits for the producer's finish, then for the hand-off from another stage."""
        dd, ii = dep
        produced = finish[:, dd, ii]
        waited = np.maximum(now, produced)
        ready = produced + self.p2p_s[dd][d] if dd != d else produced
        return np.where(ready > waited, waited + (ready - waited), waited)

    def count(self, ran: np.ndarray) -> None:
        """The conservation counters: each op run, each hand-off sent and received."""
        order, executed = self.schedule.orders, self.counters.executed
        for d, ops in enumerate(order):
            for i, op in enumerate(ops):
                runs = ran[:, d, i]
                key = (self.schedule.virtual_stage(d, op), op.kind, op.microbatch)
                for e in np.flatnonzero(runs).tolist():
                    executed[(e, *key)] = executed.get((e, *key), 0) + int(runs[e])
                done = int(runs.sum())
                sent = len(self.consumers.get((d, i), ()))
                self.counters.p2p_sent += self.p2p_bytes * sent * done
                dep = self.deps[d][i]
                if dep is not None and dep[0] != d:
                    self.counters.p2p_received += self.p2p_bytes * done

    def synchronise(self, start: np.ndarray, finish: np.ndarray, ran: np.ndarray
                    ) -> list[Synced | None]:
        """Each device's gradient synchronisation once all its entities are done, devices
        in the order they finish, ties in device order; None where a device never finished.
        The event walk takes tied devices in its event queue's order instead; ``sync``'s
        result does not depend on the order, only the interference ledger's sums may, in
        their last bit."""
        p = self.schedule.stages
        out: list[Synced | None] = [None] * p
        complete = [d for d in range(p) if np.all(ran[:, d, :len(self.schedule.orders[d])])]
        for d in sorted(complete, key=lambda d: (float(np.nanmax(finish[:, d, :])), d)):
            out[d] = self.sync(d, start[:, d, :], finish[:, d, :])
        return out


@dataclass
class Watched:
    """The progress hook of the recurrence: called every :data:`WATCH_EVERY` ops with the
    latest finish so far and the share of ops done (both only grow)."""

    hook: Callable[[float, float], None] | None
    total: int
    ops: int = 0
    latest: float = 0.0

    def add(self, finished: np.ndarray, ops: int) -> None:
        if self.hook is None:
            return
        before, self.ops = self.ops, self.ops + ops
        self.latest = max(self.latest, float(finished.max(initial=0.0)))
        if self.ops // WATCH_EVERY > before // WATCH_EVERY:
            self.hook(self.latest, self.ops / max(self.total, 1))


def assemble(
    start: np.ndarray, finish: np.ndarray, ran: np.ndarray, synced: list[Synced | None],
    events: int, counters: Counters,
) -> PipelineRun:
    """The step's :class:`PipelineRun` (a device that never synchronised ends at 0)."""
    outs = [out if out is not None else ([], 0.0) for out in synced]
    last_b = np.nanmax(finish, axis=(0, 2))
    ends = np.array([out[1] for out in outs])
    total = np.array([sum(b - a for a, b in out[0]) for out in outs])
    exposed = np.maximum(ends - last_b, 0.0)
    return PipelineRun(
        start=start,
        finish=finish,
        ran=ran,
        sync_end=ends,
        sync_exposed=exposed,
        sync_hidden=np.maximum(total - exposed, 0.0),
        buckets=tuple(tuple(out[0]) for out in outs),
        events=events,
        counters=counters,
    )


class EventPipelineSim(Pipeline):
    """The same walk as SimPy processes, for ops whose durations are only known as they run
    (the detailed mode's subclass replays each op on the network model).

    Each (entity, device) pair is one SimPy process that walks its op order: it waits for
    the op's input (the previous virtual stage's activation or the next one's gradient,
    plus the point-to-point transfer time), then runs the op (:meth:`execute`: here, busy
    for its precomputed duration). Waiting is a counter check plus at most one event per
    dependency, so a step costs O(ops) events. After its last op a device joins the
    gradient synchronisation of its stage: one shared event fires when every entity has
    finished (a counter, not ``AllOf``).
    """

    @cached_property
    def env(self) -> simpy.Environment:
        return simpy.Environment()

    def prepare(self) -> None:
        """The walk's state: each op's start, run count and finish, the waiting consumers,
        and each device's count of finished entities."""
        p, n = self.schedule.stages, len(self.schedule.orders[0])
        self.dur = [d.tolist() for d in self.durations]  # per device [E][n]
        self.start = np.full((self.entities, p, n), np.nan)
        self.ran = np.zeros((self.entities, p, n), dtype=np.int64)
        self.fin: list[list[list[float | None]]] = [
            [[None] * len(o) for o in self.schedule.orders] for _ in range(self.entities)
        ]
        self.waiters: dict[tuple[int, int, int], simpy.Event] = {}
        self.done = [0] * p
        self.all_done = [self.env.event() for _ in range(p)]
        self.sync_out: list[Synced | None] = [None] * p
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
        self.prepare()
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
        return assemble(self.start, finish, self.ran, self.sync_out, events, self.counters)
