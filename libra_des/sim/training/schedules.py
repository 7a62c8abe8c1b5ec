"""Pipeline schedules as pure op lists (GPipe, 1F1B, interleaved 1F1B).

A schedule says, for each pipeline device ``d`` in ``0..p-1``, the order in which it runs its
forward (``F``) and backward (``B``) ops. An op is ``(kind, microbatch, chunk)`` where ``chunk``
is the model chunk on that device (always 0 unless interleaved); the virtual stage it computes is
``chunk * p + d``. Dependencies are implied by the model, not stored:

* ``F(m, vs)`` needs ``F(m, vs - 1)`` (the activation from the previous virtual stage);
* ``B(m, vs)`` needs ``B(m, vs + 1)``, and ``B(m, last)`` needs ``F(m, last)``.

Executing these orders with equal op times and free communication gives the textbook bubbles
(p-1)/(m+p-1) for GPipe and 1F1B and (p-1)/(v·m+p-1) for interleaved 1F1B; tests check this.

Schedules are looked up by ``parallelism.schedule`` in :data:`REGISTRY`, never branched on:
a schedule is one :class:`PipelineSchedule` (its name, its builder, whether it takes model
chunks) and a :func:`register` call. The shipped ones (:data:`SHIPPED`) are registered on the
first look-up, then the entry points of the group ``libra_des.schedules``
(``tests/toy_schedule.py`` is a complete third-party example).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from libra_des.errors import InputError
from libra_des.registry import Registry, shipped_then_entry_points

Kind = Literal["F", "B"]


@dataclass(frozen=True)
class Op:
    """One forward or backward pass of one microbatch through one model chunk."""

    kind: Kind
    microbatch: int
    chunk: int = 0


@dataclass(frozen=True)
class Schedule:
    """Per-device op orders plus the shape they were built for."""

    name: str
    stages: int
    microbatches: int
    virtual: int
    orders: tuple[tuple[Op, ...], ...]

    def virtual_stage(self, device: int, op: Op) -> int:
        return op.chunk * self.stages + device

    def device_of(self, virtual_stage: int) -> tuple[int, int]:
        """(device, chunk) that computes ``virtual_stage``."""
        return virtual_stage % self.stages, virtual_stage // self.stages

    @property
    def last_virtual(self) -> int:
        return self.stages * self.virtual - 1

    def dependency(self, device: int, op: Op) -> tuple[int, Op] | None:
        """The (device, op) whose output ``op`` waits for, or None for the first forward."""
        vs = self.virtual_stage(device, op)
        if op.kind == "F":
            if vs == 0:
                return None
            dev, chunk = self.device_of(vs - 1)
            return dev, Op("F", op.microbatch, chunk)
        if vs == self.last_virtual:
            return device, Op("F", op.microbatch, op.chunk)
        dev, chunk = self.device_of(vs + 1)
        return dev, Op("B", op.microbatch, chunk)


def gpipe(p: int, m: int) -> Schedule:
    """All forwards, then all backwards (in reverse microbatch order, as GPipe flushes)."""
    order = tuple([Op("F", i) for i in range(m)] + [Op("B", i) for i in reversed(range(m))])
    return Schedule("gpipe", p, m, 1, tuple(order for _ in range(p)))


def one_f_one_b(p: int, m: int) -> Schedule:
    """PipeDream-flush 1F1B: warm-up forwards, steady one-forward-one-backward, cool-down."""
    orders = []
    for d in range(p):
        warm = min(p - d - 1, m)
        ops = [Op("F", i) for i in range(warm)]
        f, b = warm, 0
        while f < m:
            ops += [Op("F", f), Op("B", b)]
            f, b = f + 1, b + 1
        ops += [Op("B", i) for i in range(b, m)]
        orders.append(tuple(ops))
    return Schedule("1f1b", p, m, 1, tuple(orders))


def interleaved(p: int, m: int, v: int) -> Schedule:
    """Interleaved 1F1B with ``v`` model chunks per device (needs m to be a multiple of p).

    The k-th forward on a device runs chunk ``(k // p) % v`` of microbatch
    ``(k // (p v)) p + k % p``; backwards walk the chunks in reverse. Device ``d`` warms up with
    ``2 (p - d - 1) + (v - 1) p`` forwards, as in Megatron-LM's published schedule.
    """
    if m % p:
        raise InputError("parallelism.gbs", m, f"microbatches per replica a multiple of pp={p}")
    total = m * v

    def fwd(k: int) -> Op:
        return Op("F", (k // (p * v)) * p + k % p, (k // p) % v)

    def bwd(k: int) -> Op:
        return Op("B", (k // (p * v)) * p + k % p, v - 1 - (k // p) % v)

    orders = []
    for d in range(p):
        warm = min(2 * (p - d - 1) + (v - 1) * p, total)
        ops = [fwd(k) for k in range(warm)]
        f, b = warm, 0
        while f < total:
            ops += [fwd(f), bwd(b)]
            f, b = f + 1, b + 1
        ops += [bwd(k) for k in range(b, total)]
        orders.append(tuple(ops))
    return Schedule("interleaved", p, m, v, tuple(orders))


#: (stages p, microbatches m, model chunks per device v) -> the per-device op orders.
Builder = Callable[[int, int, int], Schedule]
#: Entry-point group third-party schedules register under.
GROUP = "libra_des.schedules"


@dataclass(frozen=True)
class PipelineSchedule:
    """One pipeline schedule as the scenario names it (``parallelism.schedule``).

    ``build(p, m, v)`` gives its op orders (every device's ops must respect the dependencies of
    :meth:`Schedule.dependency`, or the run deadlocks and its built-in check fails);
    ``chunks``: it runs ``parallelism.virtual_stages`` model chunks per device (else that knob
    must stay 1).
    """

    name: str
    build: Builder = field(compare=False)
    chunks: bool = False

    def check(self, virtual_stages: int) -> None:
        """Refuse model chunks a schedule without them would silently ignore."""
        if not self.chunks and virtual_stages != 1:
            takes = " | ".join(s.name for s in REGISTRY.items() if s.chunks)
            raise InputError("parallelism.virtual_stages", virtual_stages,
                             f"1 unless the schedule takes model chunks ({takes})")


#: The shipped schedules, registered on the first look-up.
SHIPPED = (
    PipelineSchedule("gpipe", lambda p, m, _v: gpipe(p, m)),
    PipelineSchedule("1f1b", lambda p, m, _v: one_f_one_b(p, m)),
    PipelineSchedule("interleaved", interleaved, chunks=True),
)


#: The process's registry (a plug-in registry is the one piece of module state by design).
REGISTRY: Registry[PipelineSchedule] = Registry(
    "pipeline schedule", "parallelism.schedule",
    shipped_then_entry_points(lambda: SHIPPED, GROUP, PipelineSchedule),
)
register = REGISTRY.register
names = REGISTRY.names
get = REGISTRY.get


def build_schedule(name: str, p: int, m: int, v: int = 1) -> Schedule:
    """The op orders of the schedule registered as ``name`` (``parallelism.schedule``)."""
    return get(name).build(p, m, v)
