"""Expected ECMP spine collisions for the fast (analytic) network model.

A leaf spreads the flows that leave it over its ``u`` uplinks (one per spine) by a hash of
each flow; the flow-level network (``topology.py``) does the same with a fixed hash of
(src, dst). With ``f`` equal flows hashed uniformly and independently onto ``u`` uplinks the
loads are multinomial(f; 1/u, ..., 1/u) and the busiest uplink sets the time of the traffic
that crosses the spine: on average it carries ``E[max load] / (f / u)`` times its fair share.
That ratio is the *collision factor* :func:`collision_factor` returns.

Closed form (balls into bins). For the maximum ``M`` of the ``u`` loads,

    P(M <= c) = f! / u^f * [x^f] (sum_{j=0}^{c} x^j / j!)^u

(the number of ways to place ``f`` labelled balls with at most ``c`` in each bin, over
``u^f``), and ``E[M] = sum_{c>=0} (1 - P(M <= c))``. Over ``groups`` independent sets of
``u`` bins (the leaves a collective's spine traffic leaves from, and the spine-to-leaf
downlinks it arrives on), the busiest of all sets decides: ``P(max <= c) = P(M <= c)^groups``.
The coefficient is computed as a Poisson product: with ``lambda = f / u`` and ``q_j`` the
Poisson(lambda) probabilities truncated at ``c``, ``P(M <= c) = (q^{*u})_f / Pois_f(f)``
(one FFT per ``c``, only over the ``c`` where the tail is not yet negligible).

Above :data:`EXACT_FLOWS` flows the excess over the mean is carried from that size with the
``1 / sqrt(lambda)`` law of the maximum's fluctuation (Raab and Steger, "Balls into bins - a
simple and tight analysis", 1998: ``E[M] = lambda + Theta(sqrt(lambda ln u))`` for
``f >> u ln u``), so very large leaves cost no more to price.

Assumptions: flows of one collective are of equal size (a uniform all-to-all; uneven ones
are priced with the same factor), every flow is hashed independently, and up- and downlink
sets collide independently. Real ECMP hashes 5-tuples; per-packet spraying (ideal) would be
a factor of 1.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache

import numpy as np

from libra_des.hardware.collectives.alltoall import LeafMap
from libra_des.hardware.fabric.rates import Fabric

#: Largest flow count priced exactly; beyond it the excess is scaled (module docstring).
EXACT_FLOWS = 2048
#: Tail probability below which the sum over ``c`` stops: above the FFT's round-off in
#: ``P(M <= c)`` (about 1e-12), its share of ``E[M]`` is below 1e-8 relative.
TAIL = 1e-9


def max_le(flows: int, bins: int, c: int) -> float:
    """P(the busiest of ``bins`` bins holds at most ``c`` of ``flows`` uniform balls)."""
    if c >= flows:
        return 1.0
    if c * bins < flows:
        return 0.0
    lam = flows / bins
    j = np.arange(c + 1, dtype=np.float64)
    log_fact = np.array([math.lgamma(k + 1.0) for k in range(c + 1)])
    q = np.exp(j * math.log(lam) - lam - log_fact)
    size = 1 << math.ceil(math.log2(bins * c + 1))
    coeffs = np.fft.irfft(np.fft.rfft(q, size) ** bins, size)
    total = math.exp(flows * math.log(flows) - flows - math.lgamma(flows + 1.0))
    return float(min(max(coeffs[flows] / total, 0.0), 1.0))


def expected_max(flows: int, bins: int, groups: int = 1) -> float:
    """E[the busiest bin over ``groups`` independent sets of ``bins`` bins, ``flows`` each]."""
    if flows <= 0 or bins <= 0:
        return 0.0
    if bins == 1:
        return float(flows)
    total, c = float(math.ceil(flows / bins)), math.ceil(flows / bins)
    while c < flows:
        tail = 1.0 - max_le(flows, bins, c) ** groups
        if tail < TAIL:
            break
        total += tail
        c += 1
    return total


@lru_cache(maxsize=256)
def collision_factor(flows: int, bins: int, groups: int = 1) -> float:
    """E[max load] / mean load of the busiest uplink (module docstring); 1 with one bin."""
    if flows <= 0 or bins <= 1:
        return 1.0
    if flows <= EXACT_FLOWS:
        return expected_max(flows, bins, groups) / (flows / bins)
    # The maximum's excess over the mean shrinks as 1 / sqrt(mean) (module docstring).
    base = expected_max(EXACT_FLOWS, bins, groups) / (EXACT_FLOWS / bins) - 1.0
    return 1.0 + base * math.sqrt(EXACT_FLOWS / flows)


def spine_view(fabric: Fabric, n: int, gpn: int, pxn: bool = False) -> tuple[LeafMap, float, float]:
    """The leaf map of a layout's all-to-all, its expected ECMP factor and the factor on its
    spine rate.

    Only ``fabric.busy_nodes`` of a leaf's attached nodes send across its uplinks at once:
    the ratio in force over the spine becomes the busy ports' load (never below 1), the
    rate scale is that over the fabric's leaf ratio (1 when every attached node is busy),
    and the expected ECMP factor counts the busy ports' flows; collisions slow traffic only
    as far as the load leaves no headroom (a load below 1 absorbs them first), so the
    factor returned is never below 1. ``pxn``: cross-rail messages stay on their leaf
    group (``LeafMap.local``)."""
    busy = fabric.busy_leaf_load()
    leaf_ratio = fabric.tiers[0][1] if fabric.tiers else fabric.oversubscription
    scale = max(leaf_ratio, 1.0) / max(busy, 1.0)
    ecmp = max(layout_factor(fabric, n, gpn, pxn) * min(busy, 1.0), 1.0)
    base = LeafMap.of(fabric, gpn)
    return replace(base, gain=base.gain / scale), ecmp, scale


def layout_factor(fabric: Fabric, n: int, gpn: int, pxn: bool = False) -> float:
    """The collision factor of a uniform all-to-all over ``n`` ranks, ``gpn`` per node,
    packed from node 0 at a leaf-group boundary (as
    :class:`~libra_des.hardware.collectives.alltoall.
    LeafMap` places them): per leaf, the spine-crossing flows its NICs start (this
    group's per NIC, times the NICs attached to the leaf: every NIC of a leaf is taken to
    be as busy as the group's, the assumption behind the line-over-oversubscription share),
    hashed onto the leaf's ``fabric.spines`` uplinks; the busiest uplink or spine downlink
    of every leaf the group's spine traffic touches decides. With ``pxn`` a cross-rail
    message leaves from its proxy on the destination's rail; a uniform exchange starts as
    many from each rail's leaf, so its flows are counted at the sender's leaf."""
    if fabric.spines <= 1 or n <= gpn:
        return 1.0
    leaves = LeafMap.of(fabric, gpn)
    rank = np.arange(n)
    node = rank // gpn
    spine = (node[:, None] != node[None, :]) & ~leaves.local(n, pxn)
    if not spine.any():
        return 1.0
    nics = max(fabric.nics_per_node, 1)
    rail = (rank % gpn) * nics // fabric.gpus_per_node
    group = node // fabric.leaf_nodes if fabric.leaf_nodes > 0 else np.zeros_like(node)
    leaf = group * nics + (rail if fabric.rail_optimized else 0)
    used = np.unique(leaf[spine.any(axis=1)])
    per_leaf = np.bincount(leaf, weights=spine.sum(axis=1))[used]
    nic_ports = np.bincount(leaf, weights=np.ones(n) / max(gpn // nics, 1))[used]
    attached = fabric.leaf_attached or min(fabric.nodes, fabric.leaf_nodes or fabric.nodes)
    busy = min(fabric.busy_nodes or attached, attached)
    ports = busy if fabric.rail_optimized else busy * nics
    flows = round(float((per_leaf / np.maximum(nic_ports, 1e-300)).mean()) * ports)
    return collision_factor(max(flows, 1), fabric.spines, 2 * len(used))


def stage_overlap_warning(fabric: Fabric, replays: bool) -> str | None:
    """One line when fast mode is known to disagree with the flow model for this shape:
    an oversubscribed leaf shared by nodes of several pipeline stages. Fast mode prices a
    stage's exchange as if only its own nodes (``busy_nodes``) used the leaf's uplinks;
    where other stages' exchanges overlap it, the flow model shares the uplinks and is up
    to the leaf's ratio slower (docs/communication.md, fast and detailed fidelity)."""
    attached = fabric.leaf_attached
    busy = min(fabric.busy_nodes or attached, attached)
    if replays or busy >= attached or fabric.leaf_load <= 1.0:
        return None
    return (f"fidelity fast: {attached // max(busy, 1)} pipeline stages share each "
            f"oversubscribed leaf ({fabric.leaf_load:g}:1 with all attached); fast assumes "
            "their exchanges never overlap on its uplinks, detailed shares them")
