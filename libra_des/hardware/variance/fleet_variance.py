"""Structured runtime variance: what makes GPUs of a fleet differ beyond per-op jitter.

Three sources (link jitter and host gaps are in
:mod:`libra_des.hardware.variance.link_host_variance`),
each off unless its knob is set (``variance.fleet: true`` sets every knob left unset to the
defaults of :data:`FLEET`, whose sources ``docs/variance.md`` names):

- Persistent speed: each GPU runs at its own speed for the whole run (manufacturing
  and power-management variability, the "silicon lottery"): a mean-1 lognormal factor
  (:class:`~libra_des.hardware.variance.model.LogNormalNoise`) drawn once per GPU at build.
- Correlated jitter (:func:`correlated_normals`): the per-op jitter of GPUs on one node shares
  a common part, so the log-factors of two GPUs of a node have correlation ``rho`` within one
  op (shared power delivery, cooling and host). Each GPU's marginal jitter is unchanged.
- Scoped episodes (:class:`~libra_des.hardware.variance.episodes.ScopedEpisodes`): fail-slow
  episodes that strike a whole node or a whole rack at once
  (a node's thermal or power cap, a rack's cooling or power event): the same two-state chain
  per unit as the per-GPU episodes, every GPU of the unit slowed together.

All draws come from the run's generator (persistent parts at build, jitter per call), so a
scenario and seed give the same factors; with every knob at zero nothing is drawn and the
older sources see exactly the stream they saw before.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from libra_des.errors import InputError


@dataclass(frozen=True)
class FleetDefaults:
    """Values ``variance.fleet: true`` gives the knobs left unset (docs/variance.md)."""

    gpu_speed_sigma: float = 0.013
    jitter_node_correlation: float = 0.3
    node_episode_rate: float = 2e-4
    node_episode_steps: float = 20.0
    node_episode_factor: float = 1.05
    rack_episode_rate: float = 5e-5
    rack_episode_steps: float = 50.0
    rack_episode_factor: float = 1.02
    rack_nodes: int = 4
    link_jitter_sigma: float = 0.02
    link_jitter_correlation: float = 0.3
    link_episode_rate: float = 1e-4
    link_episode_steps: float = 100.0
    link_episode_factor: float = 2.0
    launch_gap_seconds: float = 1e-5
    host_stall_rate: float = 1e-3
    host_stall_seconds: float = 0.05


FLEET = FleetDefaults()


def correlated_normals(
    rng: np.random.Generator, gpus: np.ndarray, n_ops: int, rho: float, gpus_per_node: int
) -> np.ndarray:
    """Standard normals ``(n_ops, len(gpus))`` with correlation ``rho`` within each node.

    ``z = sqrt(rho) z_node + sqrt(1 - rho) z_gpu``: unit variance for every GPU, covariance
    ``rho`` for two GPUs of one node in the same op, 0 across nodes and across ops.
    """
    if not 0.0 <= rho <= 1.0:
        raise InputError("variance.jitter_node_correlation", rho, "a correlation in [0, 1]")
    nodes, where = np.unique(np.asarray(gpus) // gpus_per_node, return_inverse=True)
    own = rng.standard_normal((n_ops, len(gpus)))
    shared = rng.standard_normal((n_ops, nodes.size))
    own *= np.sqrt(1.0 - rho)
    shared *= np.sqrt(rho)  # scaled before the gather: the same products, a node's worth
    k = len(gpus) // max(nodes.size, 1)
    if nodes.size * k == len(gpus) and np.array_equal(where, np.arange(len(gpus)) // max(k, 1)):
        # Consecutive GPUs of whole nodes (every shipped layout): broadcast, no gathered copy.
        own.reshape(n_ops, nodes.size, k)[...] += shared[:, :, None]
    else:
        own += shared[:, where]
    return own
