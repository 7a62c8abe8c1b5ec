"""Network-link and host-side variance: what slows a step besides the GPU's own kernels.

Two sources, each off unless its knob is set (``variance.fleet: true`` sets the unset ones to
the defaults of :data:`~libra_des.hardware.variance.fleet_variance.FLEET`; ``docs/variance.md``
names
their sources):

- Link variance (:class:`LinkVariance`). Each node has one link for an exchange (its
  scale-out port, or its NVLink switch for a pool inside the node). Per transfer, every link
  runs ``exp(sigma Z - sigma^2 / 2)`` times slower (mean 1): congestion and adaptive-routing
  jitter. Links under one leaf switch (``rack_nodes`` consecutive nodes) share part of it:
  two links of one rack have log-factor correlation ``rho`` within a transfer, links of
  different racks none. Rare link degradation (a flapping port, a lane down, a link
  retraining to a lower rate) is a two-state chain per link over steps, the same chain as the
  GPUs' fail-slow episodes. An exchange among the GPUs of several nodes ends when its slowest
  link does: its factor is the maximum over the links it uses.
- Host gaps (:class:`HostGaps`). Additive seconds a GPU sits idle between kernels because its
  host is late: launch and Python gaps (exponential, mean ``launch_gap_seconds`` per layer
  call) and rare stalls (garbage collection, a late data-loader batch: probability
  ``host_stall_rate`` per GPU per pipeline op, ``host_stall_seconds`` each). Independent
  across GPUs; a pool in lockstep waits for its latest worker.

Every draw comes from the generator the caller passes (the step's), and only when the source
is on, so runs without these sources see the random stream they saw before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from libra_des.errors import InputError
from libra_des.hardware.variance.fleet_variance import correlated_normals

if TYPE_CHECKING:
    from libra_des.hardware.variance.episodes import ScopedEpisodes


def check_rho(name: str, rho: float) -> None:
    """A correlation must lie in [0, 1] (one line and exit 2 otherwise)."""
    if not 0.0 <= rho <= 1.0:
        raise InputError(name, rho, "a correlation in [0, 1]")


def check_nonnegative(name: str, value: float) -> None:
    """A spread, rate or duration cannot be negative."""
    if not value >= 0.0:
        raise InputError(name, value, "a number >= 0")


@dataclass(frozen=True)
class LinkVariance:
    """Per-transfer link jitter (rack-correlated) and per-link degradation episodes.

    ``episodes`` is an :class:`~libra_des.hardware.variance.episodes.ScopedEpisodes` over nodes (one
    link per node), or None; ``gpus_per_node`` maps a GPU to its node's link.
    """

    sigma: float
    rho: float
    gpus_per_node: int
    rack_nodes: int
    episodes: ScopedEpisodes | None = None

    def __post_init__(self) -> None:
        check_nonnegative("variance.link_jitter_sigma", self.sigma)
        check_rho("variance.link_jitter_correlation", self.rho)

    def link_factors(self, rng: np.random.Generator, nodes: np.ndarray, n_ops: int,
                     step: int) -> np.ndarray:
        """``(n_ops, len(nodes))`` slow-down factors of the given links, one row per transfer."""
        nodes = np.asarray(nodes, dtype=np.int64)
        if self.sigma > 0:
            z = correlated_normals(rng, nodes, n_ops, self.rho, self.rack_nodes)
            z *= self.sigma
            z -= 0.5 * self.sigma**2
            out = np.exp(z, out=z)
        else:
            out = np.ones((n_ops, nodes.size))
        if self.episodes is not None:
            # ScopedEpisodes maps ids to units by floor division: a node is its own unit.
            out *= self.episodes.slowdown(nodes, step)
        result: np.ndarray = out
        return result

    def exchange_factors(self, rng: np.random.Generator, gpus: np.ndarray, width: int,
                         n_ops: int, step: int) -> np.ndarray:
        """``(n_ops, E)`` factor of each entity's exchange: its slowest link per transfer.

        ``gpus`` lists ``E * width`` GPUs, entity-major; an entity's exchange uses the links
        of the nodes its GPUs sit on.
        """
        node_of = np.asarray(gpus, dtype=np.int64) // self.gpus_per_node
        nodes, where = np.unique(node_of, return_inverse=True)
        per_link = self.link_factors(rng, nodes, n_ops, step)
        entities = node_of.size // width
        per_gpu = per_link[:, where.reshape(entities, width)]  # [n_ops, E, width]
        result: np.ndarray = per_gpu.max(axis=-1)
        return result


@dataclass(frozen=True)
class HostGaps:
    """Host-side idle time before a GPU's kernels (module docstring)."""

    launch_gap_seconds: float
    stall_rate: float
    stall_seconds: float

    def __post_init__(self) -> None:
        check_nonnegative("variance.launch_gap_seconds", self.launch_gap_seconds)
        check_nonnegative("variance.host_stall_seconds", self.stall_seconds)
        if not 0.0 <= self.stall_rate <= 1.0:
            raise InputError("variance.host_stall_rate", self.stall_rate, "a probability in [0, 1]")

    @property
    def active(self) -> bool:
        return self.launch_gap_seconds > 0 or (self.stall_rate > 0 and self.stall_seconds > 0)

    def mean(self, layers: float) -> float:
        """Expected gap of one GPU over one op of ``layers`` layer calls."""
        return layers * self.launch_gap_seconds + self.stall_rate * self.stall_seconds

    def gaps(self, rng: np.random.Generator, n_ops: int, layers: int, gpus: int) -> np.ndarray:
        """``(n_ops, layers, gpus)`` idle seconds before each layer call of each op.

        The launch gaps fall on every layer call; an op's stall falls on its first layer.
        """
        if self.launch_gap_seconds > 0:
            out = rng.exponential(self.launch_gap_seconds, (n_ops, layers, gpus))
        else:
            out = np.zeros((n_ops, layers, gpus))
        if self.stall_rate > 0 and self.stall_seconds > 0:
            hit = rng.random((n_ops, gpus)) < self.stall_rate
            out[:, 0, :] += np.where(hit, self.stall_seconds, 0.0)
        return out
