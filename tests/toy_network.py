"""A toy network model from outside the package: one class and its registration.

"toy_ideal": every transfer, collective and receive arrives a fixed latency after it starts,
whatever its size and whatever else is moving (no bandwidth limit, no contention). The
training simulator replays its exchange and hand-offs on it (``replays_training``), MoE runs
its dispatch, combine and copies on it. Importing this module is all it takes for scenarios
to name it (``fidelity=toy_ideal``); a third-party package would do the same from an entry
point of the group ``libra_des.network_models``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import simpy

from libra_des.sim.network.models import Fidelity, NetworkSetup, register

#: The one latency every message pays (our assumption: about one NVLink hop).
LATENCY_S = 1e-6


class IdealNetwork:
    """A :class:`~libra_des.sim.network.model.NetworkModel` of infinite bandwidth."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.messages = 0

    def arrive(self) -> simpy.Event:
        self.messages += 1
        return self.env.timeout(LATENCY_S)

    def transfer(self, src: int, dst: int, nbytes: float) -> simpy.Event:
        return self.arrive()

    def collective(
        self, op: str, gpus: Sequence[int], nbytes: float = 0.0, algorithm: str | None = None,
        send_bytes: np.ndarray | None = None, chunks: int | None = None,
    ) -> simpy.Event:
        return self.arrive()

    def receive(self, dst: int, sources: Sequence[tuple[int, float]]) -> simpy.Event:
        return self.arrive()


def build(env: simpy.Environment, _setup: NetworkSetup) -> IdealNetwork:
    return IdealNetwork(env)


MODEL = register(Fidelity("toy_ideal", build, replays_training=True))
