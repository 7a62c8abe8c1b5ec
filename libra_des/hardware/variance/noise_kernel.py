"""The variance's large draws (numba): the per-op jitter's normals, ``sigma * Z - shift``
for every element, and the fail-slow chain's blocks of steps.

numba runs numpy's own Generator algorithms (the ziggurat for ``standard_normal``) on the
Generator's bit generator, so :func:`shifted_normals` draws the same numbers as
``rng.standard_normal(out.shape)`` in C order and leaves the stream where numpy would; the
scaling is one multiply and one subtract per element, written without fast-math (no fused
multiply-add), as numpy's in-place ``z *= sigma; z -= shift`` computes it
(tests/test_noise_kernel.py checks both bit for bit), in one pass instead of numpy's
draw and two in-place passes (figures in benchmarks/README.md). The ``exp`` stays in numpy
(:meth:`~libra_des.hardware.variance.model.LogNormalNoise.sample`): the C library's would not
round every element as numpy's vector loop does. :func:`episode_states` is
:meth:`~libra_des.hardware.variance.episodes.EpisodeSchedule.generate`'s chain with each uniform
drawn
where it is used (``rng.random()`` is numpy's double, in the same order as its ``[steps,
GPUs]`` array), so that array (67 MB at 131k GPUs) is never made.
Compiled functions are cached on disk (``cache=True``, see ``base.kernel``).
"""

from __future__ import annotations

import numpy as np

from libra_des.base.kernel import Bools, Floats, kernel


@kernel
def shifted_normals(rng: np.random.Generator, out: Floats, sigma: float,
                    shift: float) -> None:
    """``out[i] = rng.standard_normal() * sigma - shift`` for the 1-d float64 ``out``."""
    for i in range(out.shape[0]):
        out[i] = rng.standard_normal() * sigma - shift


@kernel
def episode_states(rng: np.random.Generator, steps: int, before: Bools, first: bool,
                   stationary: float, leave: float, enter: float) -> Bools:
    """``[steps, GPUs]`` episode states, one uniform per element in C order: row 0 is
    ``u < stationary`` when ``first``, else one step on from ``before``; each step keeps a
    slowed GPU slowed while ``u >= leave`` and starts a healthy one's episode when
    ``u < enter`` (the two-state chain of :class:`~libra_des.hardware.variance.model.
    FailSlowEpisodes`)."""
    gpus = before.shape[0]
    states = np.empty((steps, gpus), dtype=np.bool_)
    for t in range(steps):
        for g in range(gpus):
            u = rng.random()
            if t == 0 and first:
                states[t, g] = u < stationary
            else:
                slowed = states[t - 1, g] if t > 0 else before[g]
                states[t, g] = u >= leave if slowed else u < enter
    return states
