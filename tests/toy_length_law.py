"""A toy length law from outside the package: its functions and one registration.

"toy_uniform": sample lengths uniform over the whole tokens ``min..max`` (``max`` required).
Its k-th moment has the closed form of a discrete uniform law, the mean of l^k over the
range. Importing this module is all it takes for scenarios to name it
(``workload.lengths.kind=toy_uniform``); a third-party package would do the same from an
entry point of the group ``libra_des.length_laws``.
"""

from __future__ import annotations

import numpy as np

from libra_des.config import LengthDist
from libra_des.errors import InputError
from libra_des.workload.lengths import LengthLaw, Sampler, register


def needs_max(dist: LengthDist, where: str) -> None:
    if dist.max is None:
        raise InputError(f"{where}.max", None, "a longest length for toy_uniform")


def sampler(dist: LengthDist) -> Sampler:
    assert dist.max is not None  # needs_max
    lo, hi = dist.min, dist.max
    return lambda n, rng: rng.integers(lo, hi + 1, size=n, dtype=np.int64)


def moment(dist: LengthDist, k: int) -> float:
    assert dist.max is not None  # needs_max
    return float(np.mean(np.arange(dist.min, dist.max + 1, dtype=np.float64) ** k))


LAW = register(LengthLaw("toy_uniform", sampler, moment, needs_max))
