"""A compute chunk beside transfers (numba): :func:`~libra_des.hardware.compute.interference.
stretched_chunk`'s arithmetic for one element, and over arrays.

Compiled functions are cached on disk (``cache=True``, in ``base.kernel``'s folder).
"""

from __future__ import annotations

import numpy as np

from libra_des.base.kernel import Floats, inline_kernel, kernel


@inline_kernel
def stretch(c: float, beside: float, kernel: float, comm: float) -> tuple[float, float]:
    """(compute seconds added, transfer seconds added) of a chunk of ``c`` seconds beside
    ``beside`` seconds of transfers (both as alone): they run together for
    ``w = min(c * kernel, beside * comm)``, in which the kernel does ``w / kernel`` of its
    work and the transfers take ``comm`` times longer."""
    w = c * kernel
    x = beside * comm
    w = x if x < w else w
    extra = w * (1.0 - 1.0 / comm) if comm != 1.0 else 0.0
    return w * (1.0 - 1.0 / kernel), extra


@kernel
def stretched(c: Floats, beside: Floats, kernel: float, comm: float) -> tuple[Floats, Floats]:
    """:func:`stretch` of each element of ``c`` and ``beside`` (1-d, of one length)."""
    added, extra = np.empty(c.shape[0]), np.empty(c.shape[0])
    for k in range(c.shape[0]):
        added[k], extra[k] = stretch(c[k], beside[k], kernel, comm)
    return added, extra
