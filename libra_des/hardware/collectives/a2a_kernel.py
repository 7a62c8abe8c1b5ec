"""The all-to-all(v) stack's per-rank sums in one pass (numba).

An all-to-all(v) is priced from per-rank sums of its ``[n, n]`` byte matrix: what each rank
sends and receives in each rate class, how many messages it sends and receives there, and
(PXN) what it sends to each rail. numpy forms them with a masked copy of the stack per class
and a reduction per sum (about 13 ns an entry on ``[64, 64, 64]`` stacks); one pass over the
entries forms them all.

``depth[i, j]`` says which sums a pair enters: -1 none (the diagonal, or a pair another part
of the model prices), else the deepest of the nested rate classes it belongs to (class 0
holds every priced pair, each later class a subset of the one before, as
:meth:`~libra_des.hardware.collectives.alltoall.InterNodeA2A.classes` builds them). Only messages of
more
than 0 bytes count. A message of at most ``threshold`` bytes moves at ``share`` of the rate
(NCCL's LL protocol, :meth:`~libra_des.hardware.collectives.alltoall.InterNodeA2A.moved`): its wire
bytes
are its bytes over ``share``; the rail sums keep the bytes themselves.

Compiled functions are cached on disk (``cache=True``, in ``base.kernel``'s folder).
"""

from __future__ import annotations

import numpy as np

from libra_des.base.kernel import Floats, Ints, kernel


@kernel
def pair_sums(
    send: Floats,
    depth: Ints,
    classes: int,
    threshold: float,
    share: float,
    rail: Ints,
    rails: int,
) -> tuple[Floats, Floats, Floats, Floats, Floats]:
    """Per class k, matrix s and rank: wire bytes sent and received over the pairs of depth
    >= k (``[K, S, n]`` each), the count of those messages sent and received, and per
    matrix, sender and destination rail (``rail[j]``, 0 <= it < ``rails``) the bytes of the
    priced pairs (``[S, n, rails]``)."""
    s_count, n = send.shape[0], send.shape[1]
    rows = np.zeros((classes, s_count, n))
    cols = np.zeros((classes, s_count, n))
    sent = np.zeros((classes, s_count, n))
    got = np.zeros((classes, s_count, n))
    by_rail = np.zeros((s_count, n, rails))
    for s in range(s_count):
        for i in range(n):
            for j in range(n):
                d = depth[i, j]
                m = send[s, i, j]
                if d < 0 or m <= 0.0:
                    continue
                w = m / share if m <= threshold else m
                rows[d, s, i] += w
                cols[d, s, j] += w
                sent[d, s, i] += 1.0
                got[d, s, j] += 1.0
                if rails > 0:
                    by_rail[s, i, rail[j]] += m
    for k in range(classes - 2, -1, -1):  # nested classes: class k holds every deeper pair
        rows[k] += rows[k + 1]
        cols[k] += cols[k + 1]
        sent[k] += sent[k + 1]
        got[k] += got[k + 1]
    return rows, cols, sent, got, by_rail
