"""Detailed fidelity: per-chunk attention exchange and stage hand-offs as network flows.

Same plans, costs and noise as the fast mode
(:mod:`libra_des.sim.training.stagetimes`), but each op is
replayed layer by layer: pre-attention work, then pooled attention whose chunk dispatches and
returns are all-to-all(v) collectives on the flow-level network
(:mod:`libra_des.sim.network.flow.flow_model`)
following the Pipeliner's one-channel schedule, then post-attention work. Activations and
gradients between stages travel as one flow per CP worker. Flows of different pools contend
for shared links (spine, NIC, NVSwitch ports), which the fast mode's analytic bounds ignore.
Gradient synchronisation stays analytic (bucketed all-reduce), as in the fast mode.
Its cost per step grows with the flows in flight (``benchmarks/detailed.py``; figures in
benchmarks/README.md).

What the result reports comes from the flows that ran (:func:`flow_times`): each pooled
attention call's wall time (its straggler), the communication channel's busy time, and from
them exposed and hidden attention communication. Pool waits (workers idle while the pool's
slowest worker computes) stay those of the per-worker compute arrays: only the slowest
worker's compute is replayed, so the flows add no new per-worker information.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import replace
from typing import Any

import numpy as np
import simpy

from libra_des.plan.step import StepPlan
from libra_des.sim.network.model import NetworkModel, send_together
from libra_des.sim.training.pipeline import EventPipelineSim, SyncFn
from libra_des.sim.training.schedules import Schedule
from libra_des.sim.training.stagetimes import DeviceTimes, Layout


class DetailedPipelineSim(EventPipelineSim):
    """An :class:`EventPipelineSim` whose ops and hand-offs run on a network model (the flow
    model at ``detailed`` fidelity)."""

    def __init__(
        self,
        schedule: Schedule,
        times: tuple[DeviceTimes, ...],
        plan: StepPlan,
        layout: Layout,
        net_factory: Callable[[simpy.Environment], NetworkModel],
        act_bytes: float,
        sync: SyncFn,
        backward: tuple[float, float, float] = (1.0, 0.0, 0.0),
    ) -> None:
        super().__init__(schedule, [t.duration for t in times], 0.0, act_bytes, sync)
        # Backward traffic as shares of the forward plan's matrices: Q, K, V re-sent (0 when
        # kept), and a full recomputation's dispatch and O return (merged into the backward's
        # Pipeliner schedule, whose compute already includes the recomputed forward).
        self.backward = backward
        self.times = times
        self.plan = plan
        self.net = net_factory(self.env)
        self.act_bytes = act_bytes
        width = layout.pool * layout.cp
        self.gpus = [
            layout.stage_gpus(d, plan.pipelines).reshape(plan.pipelines, width).tolist()
            for d in range(schedule.stages)
        ]
        self.arrivals: dict[tuple[int, int, int], simpy.Event] = {}
        # Measured from the flows: per (entity, device, op) each layer's pooled-attention wall
        # time, and the exchange channel's busy seconds summed over layers.
        self.attn_wall: dict[tuple[int, int, int], list[float]] = {}
        self.comm_busy: dict[tuple[int, int, int], float] = {}

    def execute(self, e: int, d: int, i: int) -> Generator[Any, Any, None]:
        t, op = self.times[d], self.schedule.orders[d][i]
        slot = self.plan.slots[e][op.microbatch]
        if op.kind == "F":
            disp, ret = slot.dispatch_bytes, slot.return_bytes
        else:
            # Backward: dO (home -> worker) out, plus Q, K, V again unless kept; dQ, dK, dV
            # back home; plus a full recomputation's forward exchange.
            resend, redo_d, redo_r = self.backward
            disp = (resend + redo_d) * slot.dispatch_bytes + slot.return_bytes.T
            ret = slot.dispatch_bytes.T + redo_r * slot.return_bytes
        m = slot.chunks
        walls = self.attn_wall.setdefault((e, d, i), [])
        # One read-only array per direction for all the op's layers and chunks: the replay
        # book finds a read-only matrix it found before by identity (ReplayBook.find).
        disp, ret = read_only(disp / m), read_only(ret / m)
        for layer in range(int(t.layers[i])):
            yield self.env.timeout(float(t.pre[e, i, layer]))
            compute = float(t.compute_max[e, i, layer]) / m
            began = self.env.now
            yield from self.pooled_attention(
                self.gpus[d][e], disp, ret, compute, m, (e, d, i)
            )
            walls.append(self.env.now - began)
            yield self.env.timeout(float(t.post[e, i, layer]))

    def pooled_attention(
        self,
        gpus: list[int],
        disp: np.ndarray,
        ret: np.ndarray,
        compute: float,
        m: int,
        key: tuple[int, int, int],
    ) -> Generator[Any, Any, None]:
        """The Pipeliner: one comm channel (dispatch k+1, then return k-1) beside compute."""
        env = self.env
        ready = [env.event() for _ in range(m)]
        started = [env.event() for _ in range(m)]
        computed = [env.event() for _ in range(m)]

        def a2a(mat: np.ndarray) -> Generator[Any, Any, None]:
            began = env.now
            yield self.net.collective("all_to_all", gpus, send_bytes=mat)
            self.comm_busy[key] = self.comm_busy.get(key, 0.0) + env.now - began

        def channel() -> Generator[Any, Any, None]:
            yield from a2a(disp)
            ready[0].succeed()
            for k in range(m):
                yield started[k]
                if k + 1 < m:
                    yield from a2a(disp)
                    ready[k + 1].succeed()
                if k >= 1:
                    yield from a2a(ret)
            yield computed[m - 1]
            yield from a2a(ret)

        def compute_stream() -> Generator[Any, Any, None]:
            for k in range(m):
                yield ready[k]
                started[k].succeed()
                yield env.timeout(compute)
                computed[k].succeed()

        env.process(compute_stream())
        yield env.process(channel())

    def finished(self, e: int, d: int, i: int) -> None:
        ev = self.waiters.pop((e, d, i), None)
        if ev is not None:
            ev.succeed()
        for dd, ii in self.consumers.get((d, i), ()):
            self.send(e, d, dd, ii)

    def send(self, e: int, d: int, dd: int, ii: int) -> None:
        """Start one flow per CP worker to the consuming stage."""
        arrived = self.arrivals.setdefault((e, dd, ii), self.env.event())
        pairs = list(zip(self.gpus[d][e], self.gpus[dd][e], strict=True))
        self.counters.p2p_sent += self.act_bytes * len(pairs)

        def done(_ev: simpy.Event) -> None:
            self.counters.p2p_received += self.act_bytes * len(pairs)
            arrived.succeed()

        send_together(self.net, pairs, self.act_bytes).callbacks.append(done)

    def wait_for(self, e: int, d: int, i: int, dep: tuple[int, int]) -> Generator[Any, Any, None]:
        if dep[0] == d:
            yield from super().wait_for(e, d, i, dep)
            return
        yield self.arrivals.setdefault((e, d, i), self.env.event())


def read_only(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` (an array of its own) made read-only."""
    matrix.flags.writeable = False
    return matrix


def flow_times(times: tuple[DeviceTimes, ...], sim: DetailedPipelineSim) -> tuple[DeviceTimes, ...]:
    """The devices' attention figures as the flows ran them (module docstring).

    Per op: its duration is the time it ran (finish - start); the straggler of each layer is
    the pooled call's wall time; exposed attention communication is the fast mode's
    (worker-mean) exposure plus what the wall time exceeds the fast mode's call time by; hidden
    is the channel's busy time not exposed.
    """
    out = []
    ran = np.array(sim.fin, dtype=float) - sim.start  # [E, p, n]
    for d, t in enumerate(times):
        straggler = np.zeros_like(t.straggler)
        busy = np.zeros_like(t.attn_hidden)
        for (e, dd, i), walls in sim.attn_wall.items():
            if dd == d:
                straggler[e, i, : len(walls)] = walls
                busy[e, i] = sim.comm_busy.get((e, dd, i), 0.0)
        exposed = np.maximum(t.attn_exposed + (straggler - t.straggler).sum(axis=-1), 0.0)
        hidden = np.maximum(busy - exposed, 0.0)
        out.append(
            replace(
                t,
                duration=ran[:, d, :],
                straggler=straggler,
                attn_exposed=exposed,
                attn_hidden=hidden,
            )
        )
    return tuple(out)
