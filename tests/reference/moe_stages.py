"""An MoE layer's stages as SimPy processes (``libra_des.sim.moe.layer`` runs them as
callbacks; tests/test_moe_sim.py compares the two runs): each stage a process that waits on
``AllOf`` its pending dependencies, then serves its traffic, its slowed compute or its work.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import simpy

from libra_des.sim.moe.layer import Contention, Stage
from libra_des.sim.network.model import NetworkModel


def launch(env: simpy.Environment, stage: Stage, net: NetworkModel | None) -> simpy.Event:
    stage.done = env.event()
    env.process(execute(env, stage, net))
    return stage.done


def compute(cont: Contention, work: float) -> Generator[simpy.Event, Any, None]:
    env = cont.env
    left, began = work, env.now
    while left > 1e-15:
        rate = 1.0 / cont.kernel if cont.active else 1.0
        t0, done = env.now, env.timeout(left / rate)
        yield done | cont.changed
        left = 0.0 if done.processed else left - (env.now - t0) * rate
    cont.slowed_s += max(env.now - began - work, 0.0)


def execute(
    env: simpy.Environment, stage: Stage, net: NetworkModel | None
) -> Generator[simpy.Event, Any, None]:
    pending = [d.done for d in stage.deps if d.done is not None and not d.done.processed]
    if pending:
        yield env.all_of(pending)
    stage.start = env.now
    cont: Contention | None = getattr(env, "contention", None)
    if stage.traffic is not None:
        assert net is not None
        held = cont is not None and cont.holds_sms(stage)
        if held and cont is not None:
            cont.toggle(1)
        yield stage.traffic.start(net)
        if held and cont is not None:
            cont.toggle(-1)
    elif stage.work > 0 and cont is not None and stage.gpu is not None:
        yield from compute(cont, stage.work)
    elif stage.work > 0:
        yield env.timeout(stage.work)
    stage.end = env.now
    assert stage.done is not None
    stage.done.succeed()
