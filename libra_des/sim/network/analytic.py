"""The analytic (alpha-beta) network model: every transfer takes the cost model's solo time.

Assumptions (stated once):

- A collective over ``gpus`` takes :meth:`CostModel.collective` (or
  :meth:`CostModel.all_to_allv` for a matrix) for that group size, with as many ranks per
  node as the busiest node holds (GPU ``g`` is on node ``g // gpus_per_node``); a transfer
  takes :meth:`CostModel.p2p` inside or across nodes; a receive pays its sources' transfers
  one after another (one copy engine). Empty or single-GPU traffic takes no time.
- Without ports the time is a plain delay: concurrent traffic does not interact (the fast
  training mode folds these times into op durations). With ports (one per GPU, e.g. MoE's
  :class:`~libra_des.sim.moe.layer.SharedLink`) the solo time is a job on every member's
  port (the receiver's for a transfer), and a port's jobs share it equally, so concurrent
  traffic on a GPU stretches each other: the stage ends when its last job does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import simpy

from libra_des.hardware.collectives import deepep
from libra_des.hardware.collectives.communication import Communication
from libra_des.hardware.costs import CostModel


class Port(Protocol):
    """A GPU's link as a server of solo-time jobs (processor sharing)."""

    def transfer(self, work: float) -> simpy.Event: ...


class AnalyticNetwork:
    """Alpha-beta :class:`~libra_des.sim.network.model.NetworkModel` (module docstring)."""

    def __init__(
        self, env: simpy.Environment, cost: Communication, ports: Sequence[Port] | None = None
    ) -> None:
        self.env = env
        self.cost = cost
        self.ports = ports
        self.gpus_per_node = cost.fabric.gpus_per_node
        # Solo times by (bytes, same node): MoE prices the same replica copies layer after
        # layer, and a cost-model call is the expensive part of a transfer here.
        self._p2p: dict[tuple[float, bool], float] = {}

    def node(self, gpu: int) -> int:
        return gpu // self.gpus_per_node

    # ------------------------------------------------------------------ NetworkModel
    def transfer(self, src: int, dst: int, nbytes: float) -> simpy.Event:
        seconds = 0.0 if src == dst else self.p2p(src, dst, nbytes)
        return self.occupy((dst,), seconds)

    def collective(
        self,
        op: str,
        gpus: Sequence[int],
        nbytes: float = 0.0,
        algorithm: str | None = None,
        send_bytes: np.ndarray | None = None,
        chunks: int | None = None,
    ) -> simpy.Event:
        """``chunks`` does not change an alpha-beta time (the shape is chunk-free)."""
        members = list(gpus)
        return self.occupy(members, self.collective_seconds(op, members, nbytes, algorithm,
                                                            send_bytes))

    def receive(self, dst: int, sources: Sequence[tuple[int, float]]) -> simpy.Event:
        seconds = 0.0
        for src, nbytes in sources:
            seconds += self.p2p(src, dst, nbytes)
        return self.occupy((dst,), seconds)

    # ------------------------------------------------------------------ pricing
    def p2p(self, src: int, dst: int, nbytes: float) -> float:
        key = (float(nbytes), self.node(src) == self.node(dst))
        if key not in self._p2p:
            self._p2p[key] = float(self.cost.p2p(key[0], same_node=key[1]))
        return self._p2p[key]

    def collective_seconds(
        self,
        op: str,
        gpus: list[int],
        nbytes: float,
        algorithm: str | None = None,
        send_bytes: np.ndarray | None = None,
    ) -> float:
        per_node = max(Counter(self.node(g) for g in gpus).values(), default=1)
        if send_bytes is not None:
            send = np.asarray(send_bytes)
            if algorithm in deepep.KERNELS:  # GPU-initiated streams, not NCCL's rounds
                if not isinstance(self.cost, CostModel):  # the SM cap needs the device
                    raise TypeError("a DeepEP kernel is priced by a CostModel")
                return deepep.matrix_seconds(self.cost, deepep.KERNELS[algorithm], send,
                                             per_node) if send.sum() > 0 else 0.0
            return 0.0 if send.sum() <= 0 else float(
                self.cost.all_to_allv(send, gpus_per_node=per_node))
        if nbytes <= 0 or len(gpus) <= 1:
            return 0.0
        return float(self.cost.collective(op, nbytes, len(gpus), per_node, algorithm).seconds)

    def occupy(self, gpus: Sequence[int], seconds: float) -> simpy.Event:
        """``seconds`` of solo time on each GPU's port (a plain delay without ports)."""
        if self.ports is None:
            return self.env.timeout(seconds)
        return self.env.all_of([self.ports[g].transfer(seconds) for g in gpus])
