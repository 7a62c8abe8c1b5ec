"""The network plug-in point: one :class:`NetworkModel` protocol for every simulator.

A network model moves bytes between GPUs in simulated time; the simulators (training's
detailed pipeline, MoE's stage graphs) only ever call these methods, so a scenario's
``fidelity`` picks the model without the simulator knowing which:

- :class:`~libra_des.sim.network.analytic.AnalyticNetwork` (``fast``): each transfer or
  collective takes the alpha-beta cost model's solo time
  (:class:`~libra_des.hardware.costs.CostModel`), optionally stretched by processor sharing
  of each GPU's port with whatever else occupies it;
- :class:`~libra_des.sim.network.flow.flow_model.Network` (``detailed``): transfers are flows on
  the topology's routes sharing links max-min fairly, and a collective runs the transfer DAG
  its algorithm has in the collective catalogue
  (:mod:`libra_des.hardware.collectives.collective_catalogue`).

A new model implements the three methods (and exposes its ``env``); nothing else changes.
:class:`Traffic` describes one communication stage as data, so a plan can say what moves
before any network is chosen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import simpy

#: :class:`Traffic` op of a GPU pulling from several sources (not a collective).
RECEIVE = "receive"


@runtime_checkable
class NetworkModel(Protocol):
    """Moves bytes between GPUs; each method returns the event that fires when done."""

    env: simpy.Environment

    def transfer(self, src: int, dst: int, nbytes: float) -> simpy.Event:
        """``nbytes`` from GPU ``src`` to GPU ``dst``."""
        ...

    def collective(
        self,
        op: str,
        gpus: Sequence[int],
        nbytes: float = 0.0,
        algorithm: str | None = None,
        send_bytes: np.ndarray | None = None,
        chunks: int | None = None,
    ) -> simpy.Event:
        """One collective over ``gpus`` (nccl-tests' ``size`` in ``nbytes``; ``send_bytes``
        an all-to-all(v) matrix; ``algorithm`` from the catalogue, the op's usual by default;
        ``chunks``: pieces of a pipelined broadcast)."""
        ...

    def receive(self, dst: int, sources: Sequence[tuple[int, float]]) -> simpy.Event:
        """GPU ``dst`` pulls ``bytes`` from each ``(src, bytes)`` (a copy engine's batch)."""
        ...


def send_together(
    net: NetworkModel, pairs: Sequence[tuple[int, int]], nbytes: float
) -> simpy.Event:
    """``nbytes`` over each ``(src, dst)`` of ``pairs`` at once; the event fires when all
    have arrived. A model may offer this as ``transfers(pairs, nbytes)`` (the flow network
    runs the messages as one coflow, with one completion); any other takes one
    :meth:`~NetworkModel.transfer` each."""
    together = getattr(net, "transfers", None)
    if together is not None:
        event: simpy.Event = together(pairs, nbytes)
        return event
    return net.env.all_of([net.transfer(src, dst, nbytes) for src, dst in pairs])


@dataclass(frozen=True, eq=False)
class Traffic:
    """What one communication stage moves, as data: a collective ``op`` over ``gpus``
    (``nbytes``, or the all-to-all(v) matrix ``send_bytes``), or, for :data:`RECEIVE`,
    ``gpus[0]`` pulling from each of ``sources``. ``algorithm``: how the collective runs
    (None: the op's usual; a DeepEP kernel name for an all-to-all(v) its kernels drive,
    :data:`libra_des.hardware.collectives.deepep.KERNELS`)."""

    op: str
    gpus: tuple[int, ...]
    nbytes: float = 0.0
    send_bytes: np.ndarray | None = None
    sources: tuple[tuple[int, float], ...] = ()
    algorithm: str | None = None

    @classmethod
    def receive(cls, dst: int, sources: Sequence[tuple[int, float]]) -> Traffic:
        return cls(RECEIVE, (dst,), sources=tuple(sources))

    def start(self, net: NetworkModel) -> simpy.Event:
        """Hand this traffic to ``net``; the event fires when all of it has arrived."""
        if self.op == RECEIVE:
            return net.receive(self.gpus[0], self.sources)
        return net.collective(self.op, self.gpus, self.nbytes, algorithm=self.algorithm,
                              send_bytes=self.send_bytes)
