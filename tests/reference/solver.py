"""Max-min fair rates of flows over links, in numpy: the reference the compiled fluid
engine (``libra_des.sim.network.flow.fluid_kernel``) is tested against (tests/test_network.py).

Input: flows as (flow, link) rows (``edge_flow``, ``edge_link``, grouped by flow) and each
link's capacity; output: every flow's max-min fair rate, exact up to float round-off (the
result of progressive filling).

- When flows end, only flows at least as fast as the slowest of them can change rate
  (:func:`refill`). Those are re-solved from their old bottleneck links: with each flow's
  bottleneck known, the fair levels follow from one triangular linear solve instead of
  progressive filling's rounds (:func:`bottleneck_levels`), and the max-min conditions are
  checked; flows failing them move bottleneck and the part above the lowest failure is
  solved again (:func:`settle`). Progressive filling (:func:`max_min_rates`) is the
  fallback. A 64-GPU all-to-all(v) whose flows all end at different instants recomputes
  rates about 4,000 times, so each recomputation must cost little more than a few passes
  over the flows.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg.lapack import dtrtrs

from libra_des.sim.network.flow.fluid_kernel import TIE_TOLERANCE

#: Relative slack of the max-min checks (saturation, feasibility, bottleneck order).
CHECK_TOLERANCE = 1e-10

#: Guided solves per recomputation before progressive filling settles what is left.
MAX_TRIES = 8
#: Most bottleneck links one dense triangular solve takes (more: progressive filling).
MAX_DENSE_LINKS = 2048


def max_min_rates(
    edge_flow: np.ndarray, edge_link: np.ndarray, n_flows: int, capacity: np.ndarray
) -> np.ndarray:
    """Max-min fair rates by progressive filling.

    ``edge_flow[e]`` crosses ``edge_link[e]``; ``capacity[l]`` is link ``l``'s bytes/s. All
    unfrozen flows rise together and a flow freezes at the fair share of the first of its
    links to saturate. Each round freezes every link whose fair share is the smallest on all
    the flows crossing it: nothing frozen earlier can change such a link's share, so several
    bottlenecks settle per round (the global minimum always does, so the loop ends).
    """
    rate = np.zeros(n_flows)
    flow, link = np.asarray(edge_flow), np.asarray(edge_link)
    if np.any(flow[1:] < flow[:-1]):
        order = np.argsort(flow, kind="stable")
        flow, link = flow[order], link[order]
    if flow.size == 0:
        return rate
    # Edges are grouped by flow: segment s (flow seg_flow[s]) has lengths[s] edges.
    starts = np.concatenate(([0], np.flatnonzero(flow[1:] != flow[:-1]) + 1))
    seg_flow, lengths = flow[starts], np.diff(np.append(starts, flow.size))
    left = np.array(capacity, dtype=float)
    share = np.empty_like(left)
    while link.size:
        count = np.bincount(link, minlength=left.size)
        share.fill(np.inf)
        np.divide(left, count, out=share, where=count > 0)
        edge_share = share[link]
        flow_min = np.minimum.reduceat(edge_share, starts)
        edge_min = np.repeat(flow_min, lengths)
        ready = np.bincount(link[edge_share <= edge_min * (1.0 + 1e-12)], minlength=left.size)
        frozen = np.logical_or.reduceat(ready[link] == count[link], starts)
        rate[seg_flow[frozen]] = flow_min[frozen]
        hit = np.repeat(frozen, lengths)
        left -= np.bincount(link[hit], weights=edge_min[hit], minlength=left.size)
        np.maximum(left, 0.0, out=left)
        link = link[~hit]
        seg_flow, lengths = seg_flow[~frozen], lengths[~frozen]
        starts = np.cumsum(lengths) - lengths
    return rate


def bottleneck_links(
    edge_flow: np.ndarray, edge_link: np.ndarray, rate: np.ndarray, capacity: np.ndarray
) -> np.ndarray:
    """Each flow's bottleneck in a max-min allocation: the lowest-numbered saturated link of
    its route on which no flow runs faster (every flow has one; -1 if round-off hid it)."""
    flow_rate = rate[edge_flow]
    load = np.bincount(edge_link, weights=flow_rate, minlength=capacity.size)
    fastest = np.zeros(capacity.size)
    np.maximum.at(fastest, edge_link, flow_rate)
    slack = 1.0 - CHECK_TOLERANCE
    ok = (load >= capacity * slack)[edge_link] & (flow_rate >= fastest[edge_link] * slack)
    bneck = np.full(rate.size, capacity.size)
    np.minimum.at(bneck, edge_flow[ok], edge_link[ok])
    bneck[bneck == capacity.size] = -1
    return bneck


def bottleneck_levels(
    edge_flow: np.ndarray,
    edge_link: np.ndarray,
    capacity: np.ndarray,
    bneck: np.ndarray,
    key: np.ndarray,
) -> np.ndarray | None:
    """Fair level of each bottleneck link if flow ``f`` runs at the level of ``bneck[f]``.

    Each bottleneck link ``l`` gives one equation, ``sum over its flows of
    level[bneck[f]] = capacity[l]``. Taken in level order (``key`` guesses it; ties by link
    number), a flow's bottleneck never comes after another of its links, so the system is
    lower triangular and one forward substitution stands in for progressive filling's
    rounds. A flow whose bottleneck does come later moves to its earliest link first.
    Links that are nobody's bottleneck get level inf; None if the system is too big.
    """
    n_links = capacity.size
    used = np.zeros(n_links, dtype=bool)
    used[bneck] = True
    links = np.flatnonzero(used)
    links = links[np.argsort(key[links], kind="stable")]
    row, col = _positions(edge_flow, edge_link, bneck, links, n_links)
    late = col > row
    if late.any():
        move = np.zeros(bneck.size, dtype=bool)
        move[edge_flow[late]] = True
        reassign(edge_flow, edge_link, np.where(used, key, np.inf), move, bneck)
        used[:] = False
        used[bneck] = True
        links = links[used[links]]
        row, col = _positions(edge_flow, edge_link, bneck, links, n_links)
    k = links.size
    if k > MAX_DENSE_LINKS:
        return None
    # Row k collects the edges on links that are nobody's bottleneck; it is dropped.
    system = np.bincount(row * k + col, minlength=(k + 1) * k)[: k * k].astype(float)
    # A C-ordered matrix is its transpose in Fortran order: solve (M^T)^T x = c.
    solved, info = dtrtrs(system.reshape(k, k).T, capacity[links], lower=0, trans=1)
    if info != 0:
        return None
    level = np.full(n_links, np.inf)
    level[links] = solved
    return level


def _positions(
    edge_flow: np.ndarray, edge_link: np.ndarray, bneck: np.ndarray, order: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per edge, the place in ``order`` of its link (``order.size`` if absent) and of its
    flow's bottleneck; ``n`` links in all."""
    pos = np.full(n, order.size)
    pos[order] = np.arange(order.size)
    return pos[edge_link], pos[bneck][edge_flow]


def reassign(
    edge_flow: np.ndarray,
    edge_link: np.ndarray,
    level: np.ndarray,
    move: np.ndarray,
    bneck: np.ndarray,
) -> None:
    """Point each flow in ``move`` at its route's lowest-level link (ties: lowest number)."""
    mine = move[edge_flow]
    flow, link = edge_flow[mine], edge_link[mine]
    order = np.lexsort((link, level[link], flow))
    flow, link = flow[order], link[order]
    first = np.ones(flow.size, dtype=bool)
    first[1:] = flow[1:] != flow[:-1]
    bneck[flow[first]] = link[first]


def restrict(
    edge_flow: np.ndarray,
    edge_link: np.ndarray,
    capacity: np.ndarray,
    rate: np.ndarray,
    chosen: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Edges of the ``chosen`` flows (renumbered) and what the other flows leave of each link."""
    if chosen.all():
        return edge_flow, edge_link, capacity
    part = chosen[edge_flow]
    others = np.where(chosen, 0.0, rate)[edge_flow]
    left = np.maximum(capacity - np.bincount(edge_link, others, capacity.size), 0.0)
    index = np.cumsum(chosen) - 1
    return index[edge_flow[part]], edge_link[part], left


def settle(
    edge_flow: np.ndarray,
    edge_link: np.ndarray,
    capacity: np.ndarray,
    rate: np.ndarray,
    bneck: np.ndarray,
    key: np.ndarray,
    tries: int = MAX_TRIES,
) -> bool:
    """Max-min rates into ``rate`` from a guessed bottleneck per flow; True if it fell back.

    A try solves :func:`bottleneck_levels` and checks the defining property of the (unique)
    max-min allocation: feasible, and every flow runs at the level of a saturated link on
    which no flow is faster. Below the lowest level at which a check fails, every flow's
    bottleneck is saturated by flows no faster than it and every link leaves the other flows
    at least that level: progressive filling's exact state there. Those flows are final;
    the rest try again on what they leave, the failing ones moved to their route's
    lowest-level link. Progressive filling settles whatever ``tries`` leave.
    """
    level = bottleneck_levels(edge_flow, edge_link, capacity, bneck, key) if tries else None
    if level is None:
        rate[:] = max_min_rates(edge_flow, edge_link, rate.size, capacity)
        bneck[:] = bottleneck_links(edge_flow, edge_link, rate, capacity)
        return True
    new = level[bneck]
    flow_rate = new[edge_flow]
    tol = 1.0 + CHECK_TOLERANCE
    over = np.bincount(edge_link, flow_rate, capacity.size) > capacity * tol
    if over.any():
        # Nobody's bottleneck yet, an overloaded link's level is at least its equal share.
        level[over] = capacity[over] / np.bincount(edge_link, minlength=capacity.size)[over]
    bad = flow_rate > (level * tol)[edge_link]
    if not bad.any():
        rate[:] = new
        return False
    move = np.zeros(rate.size, dtype=bool)
    move[edge_flow[bad]] = True
    reassign(edge_flow, edge_link, level, move, bneck)
    final = (new < level[edge_link[bad]].min() * (1.0 - TIE_TOLERANCE)) & (new > 0)
    rate[final] = new[final]
    rest = ~final
    flow, link, left = restrict(edge_flow, edge_link, capacity, new, rest)
    part_rate, part_bneck = new[rest], bneck[rest]
    fell_back = settle(flow, link, left, part_rate, part_bneck, level, tries - 1)
    rate[rest], bneck[rest] = part_rate, part_bneck
    return fell_back


def refill(
    edge_flow: np.ndarray,
    edge_link: np.ndarray,
    capacity: np.ndarray,
    rate: np.ndarray,
    bneck: np.ndarray,
    redo: np.ndarray,
) -> bool:
    """Recompute in place the max-min rates of the flows in ``redo``; the others keep theirs.

    Right for ``redo`` = every flow, and after some flows left for ``redo`` = the flows at
    least as fast as the slowest leaver (up to TIE_TOLERANCE): progressive filling below
    that level runs exactly as before (a leaver's links saturate no earlier than its own
    rate), so the rest is max-min on what the slower flows leave of each link. Old
    bottlenecks guide :func:`settle`; a new flow (``bneck`` -1) starts on its route's link
    of smallest equal share. Returns True if progressive filling was needed.
    """
    if not redo.any():
        return False
    flow, link, left = restrict(edge_flow, edge_link, capacity, rate, redo)
    guess, old = bneck[redo], rate[redo]
    key = np.full(capacity.size, np.inf)
    known = guess >= 0
    key[guess[known]] = old[known]
    if not known.all():
        share = left / np.maximum(np.bincount(link, minlength=left.size), 1)
        reassign(flow, link, share, ~known, guess)
        fresh = guess[~known]
        key[fresh] = np.minimum(share[fresh], key[fresh])
    fell_back = settle(flow, link, left, old, guess, key)
    rate[redo], bneck[redo] = old, guess
    return fell_back
