"""An ECMP ensemble of one training step: its communication under K hashes, cheaply.

The step's first sample is the run itself: the detailed pipeline on the flow network routed
with sample 0 of ``network.ecmp_seed`` (:mod:`libra_des.hardware.fabric.routing`). Its network is
wrapped in a :class:`Recorder` that notes how long every call took. Everything that does not
depend on the hash is then shared by the other samples: the plan, the op costs and their
noise, the schedule, and every call's measured time.

Each further sample is a *light replay* of the network part: the same pipeline runs again,
but every call on the network is a timeout of the time the call took in the run, plus what
the sample's hash changes:

- an all-to-all(v) adds the change of its bandwidth bound: the seconds the busiest link it
  crosses needs to carry everything on it (NIC ports, and the uplinks and downlinks the hash
  picks; :func:`~libra_des.hardware.fabric.link_loads.hashed_bounds`), under the sample's hash less
  under the run's. "Everything on it" is its *wave*: the same (``n``-th) call of every pool
  of its pipeline stage, which the schedule runs side by side (each pool of a stage makes
  the same sequence of calls);
- a stage hand-off (one flow per CP worker) and any other call keeps its time: alone, a
  flow's time does not depend on which spine it takes.

What a replay leaves out: contention that the wave does not describe (calls that overlap
in time but not in position), how the max-min shares move inside a coflow beyond its
bound, and degraded links in the bound. ``benchmarks/ecmp.py --check`` measures the replays
against full simulations of the same hashes (``benchmarks/README.md``).

When no flow meets a level where the hash has a choice, or routing is ``spray`` (one route
set), every sample is the run itself: the ensemble is exact.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import simpy

from libra_des.hardware.fabric.link_loads import hashed_bounds
from libra_des.hardware.fabric.routing import Routing
from libra_des.hardware.fabric.topology import Topology
from libra_des.sim.network.model import NetworkModel, send_together

#: A call's key: ("c", GPUs) for a collective, ("t", src, dst) for a transfer, ("t", pairs)
#: for a group's transfers sent together.
CallKey = tuple[object, ...]


@dataclass
class Recorder:
    """A network model that passes every call on to ``net`` and records, per call key in
    call order, how long the call took and, for an all-to-all(v), which exchange it was.
    Calls on one key come in program order (one pool's channel, one worker's hand-offs), so
    a replay finds its calls by key and count."""

    net: NetworkModel
    topology: Topology
    routings: tuple[Routing, ...]
    stage_of: Callable[[int], int]  # a GPU's pipeline stage
    times: dict[CallKey, list[float]] = field(default_factory=dict)
    exchanges: dict[CallKey, list[int]] = field(default_factory=dict)  # -1: not an exchange
    #: Distinct exchanges (GPUs, byte matrix), numbered; the same one repeats every layer.
    seen: list[tuple[tuple[int, ...], np.ndarray]] = field(default_factory=list)
    _index: dict[tuple[tuple[int, ...], float], list[int]] = field(default_factory=dict)
    _pairs: set[tuple[int, int]] = field(default_factory=set)
    crossed: bool = False  # whether any flow met a level where the hash has a choice
    extra: dict[CallKey, np.ndarray] = field(default_factory=dict)  # [call, sample] seconds
    env: simpy.Environment = field(init=False)

    def __post_init__(self) -> None:
        self.env = self.net.env

    def _timed(self, key: CallKey, event: simpy.Event, exchange: int) -> simpy.Event:
        times = self.times.setdefault(key, [])
        self.exchanges.setdefault(key, []).append(exchange)
        slot, began = len(times), self.env.now
        times.append(0.0)

        def ended(_e: simpy.Event) -> None:
            times[slot] = self.env.now - began

        event.callbacks.append(ended)
        return event

    def transfer(self, src: int, dst: int, nbytes: float) -> simpy.Event:
        self.note_pair(src, dst, nbytes)
        return self._timed(("t", src, dst), self.net.transfer(src, dst, nbytes), -1)

    def note_pair(self, src: int, dst: int, nbytes: float) -> None:
        """Whether a message ``src -> dst`` meets a level where the hash has a choice
        (checked once per pair)."""
        if (src, dst) not in self._pairs:
            self._pairs.add((src, dst))
            one = np.array([src]), np.array([dst]), np.array([float(nbytes)])
            self.crossed |= hashed_bounds(self.topology, *one, self.routings[:1])[1]

    def transfers(self, pairs: Sequence[tuple[int, int]], nbytes: float) -> simpy.Event:
        for src, dst in pairs:
            self.note_pair(src, dst, nbytes)
        return self._timed(("t", tuple(pairs)), send_together(self.net, pairs, nbytes), -1)

    def collective(
        self, op: str, gpus: Sequence[int], nbytes: float = 0.0, algorithm: str | None = None,
        send_bytes: np.ndarray | None = None, chunks: int | None = None,
    ) -> simpy.Event:
        event = self.net.collective(op, gpus, nbytes, algorithm, send_bytes, chunks)
        exchange = -1
        if op == "all_to_all" and send_bytes is not None:
            exchange = self.number(tuple(gpus), send_bytes)
        return self._timed(("c", tuple(gpus)), event, exchange)

    def receive(self, dst: int, sources: Sequence[tuple[int, float]]) -> simpy.Event:
        return self._timed(("r", dst), self.net.receive(dst, sources), -1)

    def number(self, gpus: tuple[int, ...], matrix: np.ndarray) -> int:
        """The exchange's number (a new one is kept with a copy of its matrix)."""
        key = (gpus, float(matrix.sum()))
        for i in self._index.get(key, ()):
            if np.array_equal(self.seen[i][1], matrix):
                return i
        self.seen.append((gpus, np.array(matrix, dtype=float)))
        self._index.setdefault(key, []).append(len(self.seen) - 1)
        return len(self.seen) - 1

    def settled(self) -> Recorder:
        """This recorder after :meth:`settle` (for chaining)."""
        self.settle()
        return self

    def settle(self) -> None:
        """Each call's extra seconds per sample (module docstring): an exchange's bandwidth
        bound among its *wave* (the same, ``n``-th, call of every pool of its stage) under
        the sample's hash less under the run's; other calls keep their time."""
        waves: dict[tuple[int, int], list[tuple[CallKey, int]]] = {}
        for key, exchanges in self.exchanges.items():
            if key[0] != "c":
                continue  # only collectives carry exchanges
            stage = self.stage_of(int(key[1][0]))  # type: ignore[index]
            for n, x in enumerate(exchanges):
                if x >= 0:
                    waves.setdefault((stage, n), []).append((key, x))
        self.extra = {key: np.zeros((len(x), len(self.routings)))
                      for key, x in self.exchanges.items()}
        cache: dict[tuple[int, ...], np.ndarray] = {}
        for (_, n), calls in waves.items():
            sig = tuple(x for _, x in calls)
            if sig not in cache:
                cache[sig] = self.wave_extra(sig)
            for (key, _), extra in zip(calls, cache[sig].T, strict=True):
                self.extra[key][n] = extra

    def wave_extra(self, members: tuple[int, ...]) -> np.ndarray:
        """``[sample, member]``: each member's bound under each hash less the run's."""
        src, dst, size, who = [], [], [], []
        for m, x in enumerate(members):
            gpus, matrix = self.seen[x]
            ranks = np.asarray(gpus, dtype=np.int64)
            i, j = np.nonzero(matrix)
            src.append(ranks[i])
            dst.append(ranks[j])
            size.append(matrix[i, j])
            who.append(np.full(i.size, m))
        bounds, crossed = hashed_bounds(self.topology, np.concatenate(src), np.concatenate(dst),
                                        np.concatenate(size), self.routings, np.concatenate(who))
        self.crossed |= crossed
        result: np.ndarray = bounds - bounds[0]
        return result


class LightReplay:
    """A network model whose every call is a timeout: sample ``sample``'s time of the
    recorder's call with the same key and count (module docstring)."""

    def __init__(self, env: simpy.Environment, record: Recorder, sample: int) -> None:
        self.env = env
        self.record = record
        self.sample = sample
        self.count: dict[CallKey, int] = {}

    def _call(self, key: CallKey) -> simpy.Event:
        n = self.count.get(key, 0)
        self.count[key] = n + 1
        took = self.record.times[key][n] + float(self.record.extra[key][n, self.sample])
        return self.env.timeout(max(took, 0.0))

    def transfer(self, src: int, dst: int, nbytes: float) -> simpy.Event:
        return self._call(("t", src, dst))

    def transfers(self, pairs: Sequence[tuple[int, int]], nbytes: float) -> simpy.Event:
        return self._call(("t", tuple(pairs)))

    def collective(
        self, op: str, gpus: Sequence[int], nbytes: float = 0.0, algorithm: str | None = None,
        send_bytes: np.ndarray | None = None, chunks: int | None = None,
    ) -> simpy.Event:
        return self._call(("c", tuple(gpus)))

    def receive(self, dst: int, sources: Sequence[tuple[int, float]]) -> simpy.Event:
        return self._call(("r", dst))


def recording(
    make: Callable[[simpy.Environment], NetworkModel], topology: Topology,
    routings: tuple[Routing, ...], stage_of: Callable[[int], int], into: list[Recorder],
) -> Callable[[simpy.Environment], NetworkModel]:
    """A network factory whose model records its calls (the recorder is appended to
    ``into``)."""

    def build(env: simpy.Environment) -> NetworkModel:
        rec = Recorder(make(env), topology, routings, stage_of)
        into.append(rec)
        return rec

    return build


def replaying(record: Recorder, sample: int) -> Callable[[simpy.Environment], NetworkModel]:
    """A network factory for the light replay of ``sample``."""

    def build(env: simpy.Environment) -> NetworkModel:
        return LightReplay(env, record, sample)

    return build


def spread(values: Sequence[float]) -> dict[str, float]:
    """Mean, min, max and (population) standard deviation of the samples' values."""
    x = np.asarray(values, dtype=float)
    return {"mean": float(x.mean()), "min": float(x.min()), "max": float(x.max()),
            "std": float(x.std())}
