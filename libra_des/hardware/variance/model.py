"""Runtime variance: multiplicative slowdowns of GPU ops and of links.

Four independent sources, each a small distribution with ``sample(rng, shape)`` and its
analytic ``mean`` and ``var``:

- :class:`LogNormalNoise`: per-GPU, per-op jitter, ``exp(sigma Z - sigma^2 / 2)`` (mean 1);
- persistent slow GPUs (:class:`BernoulliSlowdown`): a GPU is slow by ``factor`` for the whole
  run with probability ``fraction`` (drawn once when the model is built);
- :class:`FailSlowEpisodes`: a two-state Markov chain per GPU over *steps* (iterations): a
  healthy GPU enters an episode with probability ``rate`` per step, an episode ends with
  probability ``1 / steps`` per step (geometric length, mean ``steps``), and slows every op of
  the GPU by ``factor`` while it lasts;
- degraded links (:class:`BernoulliSlowdown` keyed by link id): a link runs ``factor`` times
  slower for the whole run with probability ``fraction``.

Structured sources (persistent per-GPU speed, node-correlated jitter, node and rack episodes)
are in :mod:`libra_des.hardware.variance.fleet_variance`; they are off unless set.

The sources multiply and are independent, so the per-op factor of a random GPU has mean
``prod(m_i)`` and variance ``prod(v_i + m_i^2) - prod(m_i)^2``.

Calibration (the defaults, :data:`CALIBRATED`). The paper measured 32K-token causal attention
on 256 identical GPUs for 500 steps: after dropping each step's fastest and slowest GPU,
(slowest - fastest) / fastest averaged 7.01% and peaked at 15.07%. We read one such "step" as
*one* attention call per GPU (a kernel microbenchmark: one layer's forward core attention on
identical data), not 48 layers of forward and backward: that is the unit at which a pool
barrier exposes the spread, and it is the unit the simulator draws noise for (one factor per
GPU per op). Plain lognormal jitter cannot give the peak (its max/mean ratio over 500 steps is
about 1.3, the paper's is 2.15: trimming hides a single slow GPU, so the peaks need two GPUs
slowed at once). Jitter of sigma 1.15% plus rare 10% fail-slow episodes (one start per 2,000
GPU-steps, 5 steps long on average) reproduce both figures; ``tests/test_variance.py``
measures them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from libra_des.config import VarianceSpec
from libra_des.hardware.variance.episodes import (
    BernoulliSlowdown,
    EpisodeSchedule,
    FailSlowEpisodes,
    ScopedEpisodes,
)
from libra_des.hardware.variance.fleet_variance import FLEET, correlated_normals
from libra_des.hardware.variance.link_host_variance import HostGaps, LinkVariance


@dataclass(frozen=True)
class Calibration:
    """Defaults for :class:`VarianceSpec` fields left at ``None`` (see module docstring)."""

    noise_sigma: float = 0.0115
    failslow_rate: float = 5e-4
    failslow_steps: float = 5.0
    failslow_factor: float = 1.10


CALIBRATED = Calibration()


class Distribution(Protocol):
    """A multiplicative slowdown distribution."""

    @property
    def mean(self) -> float: ...

    @property
    def var(self) -> float: ...

    def sample(self, rng: np.random.Generator, shape: int | tuple[int, ...]) -> np.ndarray: ...


@dataclass(frozen=True)
class LogNormalNoise:
    """``exp(sigma Z - sigma^2/2)`` with ``Z ~ N(0, 1)``: mean exactly 1."""

    sigma: float

    @property
    def mean(self) -> float:
        return 1.0

    @property
    def var(self) -> float:
        return float(np.expm1(self.sigma**2))

    def sample(self, rng: np.random.Generator, shape: int | tuple[int, ...]) -> np.ndarray:
        from libra_des.hardware.variance.noise_kernel import shifted_normals  # numba: on first use

        z = np.empty(shape)
        # In place, the same operations in the same order as exp(sigma z - sigma^2/2): at
        # 131k GPUs a step's factors are 75 MiB per array, and temporaries set the peak.
        # The draws and the scaling in one compiled pass (the same numbers as numpy's).
        shifted_normals(rng, z.reshape(-1), self.sigma, 0.5 * self.sigma**2)
        return np.exp(z, out=z)


@dataclass(frozen=True)
class Structure:
    """The structured sources of one run (each None when off)."""

    speed: np.ndarray | None = None
    correlation: float = 0.0
    gpus_per_node: int = 1
    scoped: tuple[ScopedEpisodes, ...] = ()

    @classmethod
    def build(
        cls, spec: VarianceSpec, num_gpus: int, gpus_per_node: int, rng: np.random.Generator
    ) -> tuple[Structure, tuple[Distribution, ...]]:
        """Draw the persistent parts; also the distributions behind the per-op factor."""
        sigma = fleet_value(spec, "gpu_speed_sigma")
        speed = LogNormalNoise(sigma).sample(rng, num_gpus) if sigma > 0 else None
        sources: list[Distribution] = [LogNormalNoise(sigma)] if sigma > 0 else []
        scoped = []
        for scope, unit in (("node", gpus_per_node),
                            ("rack", gpus_per_node * int(fleet_value(spec, "rack_nodes")))):
            chain = FailSlowEpisodes(fleet_value(spec, f"{scope}_episode_rate"),
                                     fleet_value(spec, f"{scope}_episode_steps"),
                                     fleet_value(spec, f"{scope}_episode_factor"))
            if chain.marginal.active:
                seed = int(rng.integers(0, 2**63))
                units = -(-num_gpus // unit)
                scoped.append(ScopedEpisodes(unit, EpisodeSchedule(chain, units, seed)))
                sources.append(chain)
        rho = fleet_value(spec, "jitter_node_correlation")
        return cls(speed, rho, gpus_per_node, tuple(scoped)), tuple(sources)

    def jitter(self, noise: LogNormalNoise, rng: np.random.Generator, gpus: np.ndarray,
               n_ops: int) -> np.ndarray:
        """Per-op lognormal jitter, node-correlated when ``correlation`` is set."""
        if self.correlation <= 0:
            return noise.sample(rng, (n_ops, gpus.size))
        z = correlated_normals(rng, gpus, n_ops, self.correlation, self.gpus_per_node)
        z *= noise.sigma
        z -= 0.5 * noise.sigma**2
        result: np.ndarray = np.exp(z, out=z)
        return result

    def apply(self, out: np.ndarray, gpus: np.ndarray, step: int) -> None:
        """Multiply the persistent speed and the scoped episodes into ``out`` in place."""
        if self.speed is not None:
            out *= self.speed[gpus]
        for episodes in self.scoped:
            out *= episodes.slowdown(gpus, step)


def fleet_value(spec: VarianceSpec, name: str) -> float:
    """A structured knob: as set, else the fleet default under ``fleet: true``, else off."""
    value = getattr(spec, name)
    if value is not None:
        return float(value)
    if spec.fleet:
        return float(getattr(FLEET, name))
    return float(getattr(OFF, name))


#: The structured knobs when neither set nor taken from the fleet defaults: every source off
#: (rates, spread and correlation 0); an episode's length and factor keep the fleet values, so
#: setting a rate alone gives episodes of the documented shape.
OFF = replace(FLEET, gpu_speed_sigma=0.0, jitter_node_correlation=0.0, node_episode_rate=0.0,
              rack_episode_rate=0.0, link_jitter_sigma=0.0, link_jitter_correlation=0.0,
              link_episode_rate=0.0, launch_gap_seconds=0.0, host_stall_rate=0.0)


def build_links(spec: VarianceSpec, num_gpus: int, gpus_per_node: int,
                rng: np.random.Generator) -> LinkVariance | None:
    """The run's link variance (None when off); draws its episode seed only when on."""
    sigma = fleet_value(spec, "link_jitter_sigma")
    chain = FailSlowEpisodes(fleet_value(spec, "link_episode_rate"),
                             fleet_value(spec, "link_episode_steps"),
                             fleet_value(spec, "link_episode_factor"))
    if sigma <= 0 and not chain.marginal.active:
        return None
    episodes = None
    if chain.marginal.active:
        links = -(-num_gpus // gpus_per_node)
        episodes = ScopedEpisodes(1, EpisodeSchedule(chain, links, int(rng.integers(0, 2**63))))
    return LinkVariance(sigma, fleet_value(spec, "link_jitter_correlation"), gpus_per_node,
                        int(fleet_value(spec, "rack_nodes")), episodes)


def build_host(spec: VarianceSpec) -> HostGaps | None:
    """The run's host gaps (None when off)."""
    host = HostGaps(fleet_value(spec, "launch_gap_seconds"), fleet_value(spec, "host_stall_rate"),
                    fleet_value(spec, "host_stall_seconds"))
    return host if host.active else None


def unit_hash(seed: int, key: object) -> float:
    """A stable uniform number in [0, 1) for (seed, key), independent of Python's hash salt."""
    digest = hashlib.blake2b(f"{seed}|{key!r}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2.0**64


class VarianceModel:
    """Per-op GPU slowdowns and per-link slowdowns for one run.

    Built once per run from a :class:`VarianceSpec`, the GPU count and a generator; afterwards
    only :meth:`factors` consumes randomness (the per-op jitter, from the generator it is
    given). Persistent slow GPUs, fail-slow episodes and degraded links are fixed functions of
    the build, so two policies simulated from the same build meet the same slow GPUs.
    """

    def __init__(
        self,
        num_gpus: int,
        noise: LogNormalNoise | None = None,
        persistent: np.ndarray | None = None,
        episodes: EpisodeSchedule | None = None,
        links: BernoulliSlowdown | None = None,
        link_seed: int = 0,
        sources: tuple[Distribution, ...] = (),
        structure: Structure | None = None,
        network: LinkVariance | None = None,
        host: HostGaps | None = None,
    ) -> None:
        self.num_gpus = num_gpus
        self.noise = noise
        self.persistent = persistent
        self.episodes = episodes
        self.links = links
        self.link_seed = link_seed
        # The distributions behind the per-op factor (for the analytic mean and variance).
        self.sources = sources
        self.structure = structure or Structure()
        # Per-transfer link factors and host-side gaps (link_host_variance.py), None when off.
        self.network = network
        self.host = host

    @classmethod
    def none(cls) -> VarianceModel:
        """No noise at all: every factor is 1."""
        return cls(0)

    @classmethod
    def build(
        cls, spec: VarianceSpec, num_gpus: int, rng: np.random.Generator, gpus_per_node: int = 1
    ) -> VarianceModel:
        """Draw the persistent parts (slow GPUs, episode and link seeds) of one run.

        The structured sources draw after the older ones, and only when on, so a run without
        them sees the same stream as before they existed.
        """
        if not spec.enabled:
            return cls.none()
        sigma = CALIBRATED.noise_sigma if spec.noise_sigma is None else spec.noise_sigma
        slow = BernoulliSlowdown(spec.slow_gpu_fraction, spec.slow_factor)
        episodes = FailSlowEpisodes(
            rate=CALIBRATED.failslow_rate if spec.failslow_rate is None else spec.failslow_rate,
            steps=CALIBRATED.failslow_steps if spec.failslow_steps is None else spec.failslow_steps,
            factor=CALIBRATED.failslow_factor
            if spec.failslow_factor is None
            else spec.failslow_factor,
        )
        persistent = slow.sample(rng, num_gpus) if slow.active else None
        episode_seed, link_seed = (int(s) for s in rng.integers(0, 2**63, size=2))
        structure, structured = Structure.build(spec, num_gpus, gpus_per_node, rng)
        network = build_links(spec, num_gpus, gpus_per_node, rng)
        return cls(
            num_gpus,
            noise=LogNormalNoise(sigma) if sigma > 0 else None,
            persistent=persistent,
            episodes=EpisodeSchedule(episodes, num_gpus, episode_seed)
            if episodes.marginal.active
            else None,
            links=BernoulliSlowdown(spec.degraded_link_fraction, spec.degraded_link_factor),
            link_seed=link_seed,
            sources=(LogNormalNoise(sigma), slow, episodes, *structured),
            structure=structure,
            network=network,
            host=build_host(spec),
        )

    def factors(
        self, rng: np.random.Generator, gpus: np.ndarray, n_ops: int, step: int
    ) -> np.ndarray:
        """Slowdown factors, shape ``(n_ops, len(gpus))``: jitter x persistent x fail-slow x
        the structured sources."""
        gpus = np.asarray(gpus, dtype=np.int64)
        if self.noise is None:
            out = np.ones((n_ops, gpus.size))
        else:
            out = self.structure.jitter(self.noise, rng, gpus, n_ops)
        if self.persistent is not None:
            out *= self.persistent[gpus]
        if self.episodes is not None:
            slowed = self.episodes.slowed(step)[gpus]
            out *= np.where(slowed, self.episodes.episodes.factor, 1.0)
        self.structure.apply(out, gpus, step)
        return out

    def exchange_factors(self, rng: np.random.Generator, gpus: np.ndarray, width: int,
                         n_ops: int, step: int) -> np.ndarray | None:
        """``(n_ops, E)`` link factor of each entity's exchange per transfer (None: off)."""
        if self.network is None:
            return None
        return self.network.exchange_factors(rng, gpus, width, n_ops, step)

    def host_gaps(self, rng: np.random.Generator, n_ops: int, layers: int,
                  gpus: int) -> np.ndarray | None:
        """``(n_ops, layers, gpus)`` host idle seconds before each layer call (None: off)."""
        return None if self.host is None else self.host.gaps(rng, n_ops, layers, gpus)

    def link_factor(self, link_id: object) -> float:
        """How many times slower a link runs (1 unless it drew a degradation)."""
        if self.links is None or not self.links.active:
            return 1.0
        hit = unit_hash(self.link_seed, link_id) < self.links.fraction
        return self.links.factor if hit else 1.0

    @property
    def mean(self) -> float:
        """Analytic mean of one op's factor on a random GPU at a random step."""
        return float(np.prod([d.mean for d in self.sources]))

    @property
    def var(self) -> float:
        """Analytic variance of that factor (independent sources multiply)."""
        second = float(np.prod([d.var + d.mean**2 for d in self.sources]))
        return second - self.mean**2
