"""How a cross-node all-to-all's per-NIC rate falls as nodes are added: incast at the NIC.

Every receiving NIC of an all-to-all is the meeting point of flows from every other node at
once: NCCL posts its peers in batches of 8 per channel on up to 32-64 p2p channels
(``enqueue.cc``, ``paths.cc``), so on ``N`` nodes a NIC takes ``F = N - 1`` converging
senders (with PXN one proxy per remote node on its rail, without it more). RoCE's congestion
control (DCQCN: ECN marks at the switch queue cut each sender's rate, recovery is additive)
and InfiniBand's credit back-pressure both keep such a fan-in's queue short at the cost of
idle line time: the more synchronised senders share one port, the larger the aggregate's
rate swings and the lower its mean. We take the share of the line rate a NIC keeps under a
fan-in ``F`` as

    incast_share(F) = 1 / (1 + KAPPA log2 F)        (1 at F = 1: two nodes)

(the log form is our assumption: each doubling of synchronised senders costs the same).
``KAPPA`` is fitted on the public all-to-all measurements of
``calibration/public/alltoall-efficiency.csv`` marked ``fit`` (large messages, where the
message model's per-peer terms are negligible), each taken over the model's own prediction
without the share (:func:`fit_kappa`; ``tests/test_a2a_incast.py`` re-fits it). The share
scales the NIC rates of a cross-node all-to-all priced from datasheet curves
(``Mechanisms.fan_in``); measured inter-node curves carry their own machine's incast and are
not scaled. Both fidelities use it: the fast model in the NICs' rates, the flow model by
stretching each cross-node flow of an all-to-all by ``1 / incast_share``
(:mod:`libra_des.sim.network.flow.flow_model`).
"""

from __future__ import annotations

import math

#: Fitted on the CSV's ``fit`` rows (NVIDIA/nccl#1792: about 18.9 GB/s per 400G NIC on 16
#: H20 nodes at large sizes, against the model's 46.9 without the share on ``h100-ib-ndr``).
#: One public point at one width: the law's form, not the data, carries it to other widths.
KAPPA = 0.379


def incast_share(nodes: int) -> float:
    """Share of a NIC's all-to-all rate left with ``nodes - 1`` remote nodes converging."""
    fan_in = max(int(nodes) - 1, 1)
    return 1.0 / (1.0 + KAPPA * math.log2(fan_in))


def applied_share(nodes: int, datasheet: bool, eta: float, fan_in: bool) -> float:
    """The share a cross-node all-to-all over ``nodes`` nodes runs at, in both fidelities:
    :func:`incast_share` on datasheet curves with the all-to-all's NIC efficiency in force
    (``eta < 1``) and ``Mechanisms.fan_in`` on; 1 otherwise (a measured curve carries its own
    machine's incast)."""
    return incast_share(nodes) if datasheet and eta < 1 and fan_in else 1.0


def fit_kappa(points: list[tuple[int, float]]) -> float:
    """``KAPPA`` from (nodes, measured over the model without the share) points: least
    squares of ``1 / share - 1 = KAPPA log2(nodes - 1)`` (closed form, through 0)."""
    xs = [math.log2(n - 1) for n, _ in points]
    ys = [1.0 / s - 1.0 for _, s in points]
    return sum(x * y for x, y in zip(xs, ys, strict=True)) / sum(x * x for x in xs)
