"""Wichura's algorithm AS 241 (PPND16) for the standard normal quantile, compiled (numba).

M. J. Wichura, "The percentage points of the normal distribution", Applied Statistics
37(3), 477-484, 1988: three rational approximations, for ``|p - 1/2| <= 0.425``, for the
tails up to ``sqrt(-log(min(p, 1 - p))) <= 5`` and beyond, accurate to about 1 part in
1e16. The coefficients below are the paper's. A plain loop over the probabilities: the
length laws draw hundreds of thousands at a time, and one pass per element beats numpy's
masked, allocating passes over the three regions (benchmarks/README.md). Imported by
:func:`libra_des.workload.normal.ndtri` on its first call, so that reading a length law
loads numba only when lengths are drawn. Compiled functions are cached on disk
(``cache=True``, see ``base.kernel``).
"""

from __future__ import annotations

import math

import numpy as np

from libra_des.base.kernel import Floats, inline_kernel, kernel

#: Central region: ``|p - 1/2| <= SPLIT_CENTRAL``, in ``r = CENTRAL_R - q^2``.
SPLIT_CENTRAL = 0.425
CENTRAL_R = 0.180625
#: Tails: ``r = sqrt(-log(min(p, 1 - p)))``; near tail below ``SPLIT_TAIL``, shifted by
#: ``NEAR_SHIFT``; far tail beyond, shifted by ``SPLIT_TAIL``.
SPLIT_TAIL = 5.0
NEAR_SHIFT = 1.6
#: Numerator and denominator coefficients, highest power first (numpy.polyval's order); the
#: denominators' constant term is 1.
CENTRAL_NUM = (
    2.5090809287301226727e3, 3.3430575583588128105e4, 6.7265770927008700853e4,
    4.5921953931549871457e4, 1.3731693765509461125e4, 1.9715909503065514427e3,
    1.3314166789178437745e2, 3.3871328727963666080e0,
)
CENTRAL_DEN = (
    5.2264952788528545610e3, 2.8729085735721942674e4, 3.9307895800092710610e4,
    2.1213794301586595867e4, 5.3941960214247511077e3, 6.8718700749205790830e2,
    4.2313330701600911252e1, 1.0,
)
NEAR_NUM = (
    7.74545014278341407640e-4, 2.27238449892691845833e-2, 2.41780725177450611770e-1,
    1.27045825245236838258e0, 3.64784832476320460504e0, 5.76949722146069140550e0,
    4.63033784615654529590e0, 1.42343711074968357734e0,
)
NEAR_DEN = (
    1.05075007164441684324e-9, 5.47593808499534494600e-4, 1.51986665636164571966e-2,
    1.48103976427480074590e-1, 6.89767334985100004550e-1, 1.67638483018380384940e0,
    2.05319162663775882187e0, 1.0,
)
FAR_NUM = (
    2.01033439929228813265e-7, 2.71155556874348757815e-5, 1.24266094738807843860e-3,
    2.65321895265761230930e-2, 2.96560571828504891230e-1, 1.78482653991729133580e0,
    5.46378491116411436990e0, 6.65790464350110377720e0,
)
FAR_DEN = (
    2.04426310338993978564e-15, 1.42151175831644588870e-7, 1.84631831751005468180e-5,
    7.86869131145613259100e-4, 1.48753612908506148525e-2, 1.36929880922735805310e-1,
    5.99832206555887937690e-1, 1.0,
)



@inline_kernel
def horner(coefficients: tuple[float, ...], x: float) -> float:
    """The polynomial with ``coefficients`` (highest power first) at ``x``."""
    y = coefficients[0]
    for c in coefficients[1:]:
        y = y * x + c
    return y


@inline_kernel
def quantile(p: float) -> float:
    """x with P(Z <= x) = p; -inf at 0, inf at 1, nan outside [0, 1] (and for nan)."""
    q = p - 0.5
    if abs(q) <= SPLIT_CENTRAL:
        r = CENTRAL_R - q * q
        return q * horner(CENTRAL_NUM, r) / horner(CENTRAL_DEN, r)
    if not 0.0 <= p <= 1.0:
        return math.nan
    tail = min(p, 1.0 - p)  # the tail's probability
    if tail == 0.0:
        z = math.inf
    else:
        r = math.sqrt(-math.log(tail))
        if r <= SPLIT_TAIL:
            r -= NEAR_SHIFT
            z = horner(NEAR_NUM, r) / horner(NEAR_DEN, r)
        else:
            r -= SPLIT_TAIL
            z = horner(FAR_NUM, r) / horner(FAR_DEN, r)
    return -z if q < 0 else z


@kernel
def quantiles(p: Floats) -> Floats:
    """:func:`quantile` of every element of the 1-d float64 array ``p``."""
    out = np.empty_like(p)
    for i in range(p.shape[0]):
        out[i] = quantile(p[i])
    return out
