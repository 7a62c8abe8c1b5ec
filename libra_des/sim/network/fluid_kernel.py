"""Compiled (numba) kernels of the flow network's rate bookkeeping (see :mod:`.fluid`).

State lives in arrays owned by :class:`~libra_des.sim.network.fluid.FluidState`:

* flow slots ``s``: bytes left ``rem``, ``size``, ``rate``, receiving GPU ``dst``, coflow
  ``grp``, path ``fpath``, binding links ``flink[s, :nlink[s]]`` and the flow's place in each
  link's list ``fpos``; ``active[:nact]`` lists the live slots (``apos`` is a slot's place),
  ``free[:nfree]`` the free ones;
* links ``l``: capacity ``cap``, live flows ``lflow[l, :deg[l]]``;
* ``gleft[g]``: flows of coflow ``g`` not yet done;
* ``ctr``: [nact, nfree, recomputations, flows done, epoch, touched links].

One *update* is what :class:`~libra_des.sim.network.flow_model.Network` did per rate change,
in the same order and with the same arithmetic where it matters (draining ``rem -= rate *
elapsed``, the done test, the clock-resolution retirement): drain, retire finished flows,
re-solve, find the next end. Max-min rates are re-solved only in the connected component
(flows linked through shared binding links) of the links whose flows changed, and there, after
departures only, only for flows at least as fast as the slowest leaver (below it progressive
filling runs as before: :func:`libra_des.sim.network.solver.refill`'s argument). The solve is
progressive filling level by level, exact up to float round-off.

:func:`run` chains updates while the next flow end comes strictly before ``horizon`` (the next
SimPy event) and no coflow completes: nothing outside the network can act in between, so the
results are those of one SimPy timer per end, without the timers.

Imported on the first flow-level run (``fluid.FluidState``); compiled functions are cached
on disk (``cache=True``, in ``startup.numba_module``'s folder). tests/reference/solver.py
holds the numpy max-min solver it is compared with.
"""

from __future__ import annotations

import math

import numpy as np

from libra_des.base.startup import numba_module
from libra_des.sim.network.fluid import DONE_TOLERANCE, MARGIN

numba = numba_module()

#: Flows this close (relative) below a level that is recomputed are recomputed too (ties).
TIE_TOLERANCE = 1e-9
#: Links whose fair share is this close (relative) above the lowest saturate in its round.
LEVEL_TOLERANCE = 1e-12

NACT, NFREE, RECOMPUTATIONS, FLOWS_DONE, EPOCH, NTOUCHED, NHOT = range(7)


@numba.njit(cache=True, nogil=True)
def _spacing(x: float) -> float:
    """np.spacing(x) for x >= 1 (the gap to the next float)."""
    _, exponent = math.frexp(x)
    return math.ldexp(1.0, exponent - 53)


@numba.njit(cache=True, nogil=True)
def _touch(link: int, touched: np.ndarray, lmark: np.ndarray, ctr: np.ndarray) -> None:
    """Remember ``link`` as changed (once per update; ``lmark`` -1 marks it)."""
    if lmark[link] != -1:
        lmark[link] = -1
        touched[ctr[NTOUCHED]] = link
        ctr[NTOUCHED] += 1


@numba.njit(cache=True, nogil=True)
def _place(
    s: int, fpath: np.ndarray, plinks: np.ndarray, pn: np.ndarray, flink: np.ndarray,
    fpos: np.ndarray, nlink: np.ndarray, lflow: np.ndarray, deg: np.ndarray,
    touched: np.ndarray, lmark: np.ndarray, ctr: np.ndarray,
) -> None:
    """Put flow ``s`` on its path's binding links."""
    p = fpath[s]
    nlink[s] = pn[p]
    for j in range(pn[p]):
        link = plinks[p, j]
        flink[s, j] = link
        fpos[s, j] = deg[link]
        lflow[link, deg[link]] = s
        deg[link] += 1
        _touch(link, touched, lmark, ctr)


@numba.njit(cache=True, nogil=True)
def insert(
    slots: np.ndarray, flink: np.ndarray, fpos: np.ndarray, nlink: np.ndarray,
    fpath: np.ndarray, plinks: np.ndarray, pn: np.ndarray, lflow: np.ndarray,
    deg: np.ndarray, active: np.ndarray, apos: np.ndarray, touched: np.ndarray,
    lmark: np.ndarray, ctr: np.ndarray,
) -> None:
    """Put the flows in ``slots`` (fields other than links already set) on their paths'
    binding links and in the active list."""
    for s in slots:
        _place(s, fpath, plinks, pn, flink, fpos, nlink, lflow, deg, touched, lmark, ctr)
        apos[s] = ctr[NACT]
        active[ctr[NACT]] = s
        ctr[NACT] += 1


@numba.njit(cache=True, nogil=True)
def _drop(
    s: int, flink: np.ndarray, fpos: np.ndarray, nlink: np.ndarray, lflow: np.ndarray,
    deg: np.ndarray, active: np.ndarray, apos: np.ndarray, free: np.ndarray,
    touched: np.ndarray, lmark: np.ndarray, ctr: np.ndarray,
) -> None:
    """Take flow ``s`` off its links and the active list (swap with the last entry)."""
    for j in range(nlink[s]):
        link = flink[s, j]
        last = lflow[link, deg[link] - 1]
        pos = fpos[s, j]
        lflow[link, pos] = last
        for k in range(nlink[last]):
            if flink[last, k] == link:
                fpos[last, k] = pos
        deg[link] -= 1
        _touch(link, touched, lmark, ctr)
    moved = active[ctr[NACT] - 1]
    active[apos[s]] = moved
    apos[moved] = apos[s]
    ctr[NACT] -= 1
    free[ctr[NFREE]] = s
    ctr[NFREE] += 1


@numba.njit(cache=True, nogil=True)
def _solve(
    floor: float, rate: np.ndarray, flink: np.ndarray, nlink: np.ndarray,
    lflow: np.ndarray, deg: np.ndarray, cap: np.ndarray, touched: np.ndarray,
    lmark: np.ndarray, fmark: np.ndarray, ctr: np.ndarray, queue: np.ndarray,
    left: np.ndarray, count: np.ndarray, reached: np.ndarray,
) -> int:
    """Max-min rates of the flows at least as fast as ``floor`` (up to TIE_TOLERANCE)
    connected to the touched links through such flows (see module docstring); ``queue``,
    ``left`` and ``count`` are scratch space of one entry per link. When ``reached`` has room
    (one entry per link), the links the solve reached are copied there; returns how many."""
    ctr[EPOCH] += 1
    epoch = ctr[EPOCH]
    nq = 0
    for t in range(ctr[NTOUCHED]):
        queue[nq] = touched[t]
        lmark[touched[t]] = epoch
        nq += 1
    ctr[NTOUCHED] = 0
    # Breadth-first over links and the flows to solve (fmark = epoch; epoch + 1 once their
    # rate is set); slower flows keep their rates and only take their share of each link.
    threshold = floor * (1.0 - TIE_TOLERANCE)
    head = 0
    while head < nq:
        link = queue[head]
        head += 1
        room, fast = cap[link], 0
        for p in range(deg[link]):
            s = lflow[link, p]
            if rate[s] < threshold:
                room -= rate[s]
                continue
            fast += 1
            if fmark[s] != epoch:
                fmark[s] = epoch
                for j in range(nlink[s]):
                    m = flink[s, j]
                    if lmark[m] != epoch:
                        lmark[m] = epoch
                        queue[nq] = m
                        nq += 1
        left[link], count[link] = max(room, 0.0), fast
    if reached.size >= nq:
        reached[:nq] = queue[:nq]
    # Progressive filling by levels: each round the lowest fair share saturates its links
    # (and every link within LEVEL_TOLERANCE of it); freezing flows only raises the other
    # links' shares, so a round freezes its links one after another at their current shares
    # (never above the lowest share's LEVEL_TOLERANCE).
    open_links = queue
    n = 0
    for q in range(nq):
        if count[queue[q]] > 0:
            open_links[n] = queue[q]
            n += 1
    level = np.inf
    for q in range(n):
        level = min(level, left[open_links[q]] / count[open_links[q]])
    while n > 0:
        # ``level`` is the lowest share or, after a round that froze flows, a lower bound on
        # it (the shares seen before later freezes in the round); a round below every share
        # freezes nothing and finds the exact lowest.
        limit = level * (1.0 + LEVEL_TOLERANCE)
        kept = 0
        level = np.inf
        for q in range(n):
            link = open_links[q]
            if count[link] == 0:
                continue
            share = left[link] / count[link]
            if share > limit:
                open_links[kept] = link
                kept += 1
                level = min(level, share)
                continue
            for p in range(deg[link]):
                s = lflow[link, p]
                if fmark[s] != epoch:
                    continue
                fmark[s] = epoch + 1
                rate[s] = share
                for j in range(nlink[s]):
                    m = flink[s, j]
                    if m != link:
                        left[m] = max(left[m] - share, 0.0)
                        count[m] -= 1
            count[link] = 0
        n = kept
    ctr[EPOCH] += 1
    return nq


@numba.njit(cache=True, nogil=True)
def _raise_peaks(
    reached: np.ndarray, nq: int, rate: np.ndarray, lflow: np.ndarray, deg: np.ndarray,
    peak: np.ndarray,
) -> None:
    """``peak[l]``: the highest load (sum of its flows' rates) link ``l`` has carried; only
    the links a solve reached can have gained load."""
    for q in range(nq):
        link = reached[q]
        peak[link] = max(peak[link], _load(link, rate, lflow, deg))


@numba.njit(cache=True, nogil=True)
def _load(link: int, rate: np.ndarray, lflow: np.ndarray, deg: np.ndarray) -> float:
    """The sum of the rates of ``link``'s flows."""
    load = 0.0
    for p in range(deg[link]):
        load += rate[lflow[link, p]]
    return load


@numba.njit(cache=True, nogil=True)
def loads(
    links: np.ndarray, rate: np.ndarray, lflow: np.ndarray, deg: np.ndarray
) -> np.ndarray:
    """The load of each of ``links`` (bytes/s)."""
    out = np.zeros(links.size)
    for i in range(links.size):
        out[i] = _load(links[i], rate, lflow, deg)
    return out


@numba.njit(cache=True, nogil=True)
def _check_reserved(
    reached: np.ndarray, nq: int, rate: np.ndarray, lflow: np.ndarray, deg: np.ndarray,
    cap: np.ndarray, reserved: np.ndarray, hot: np.ndarray, ctr: np.ndarray,
) -> None:
    """List in ``hot`` (``ctr[NHOT]`` of them) the links a solve reached whose load plus the
    replays' reservation leaves less than MARGIN of their capacity."""
    ctr[NHOT] = 0
    for q in range(nq):
        link = reached[q]
        room = cap[link] * (1.0 - MARGIN) - reserved[link]
        if reserved[link] > 0.0 and _load(link, rate, lflow, deg) > room:
            hot[ctr[NHOT]] = link
            ctr[NHOT] += 1


@numba.njit(cache=True, nogil=True)
def run(
    now: float, updated_at: float, horizon: float, floor: float,
    rem: np.ndarray, size: np.ndarray, rate: np.ndarray, dst: np.ndarray, grp: np.ndarray,
    flink: np.ndarray, fpos: np.ndarray, nlink: np.ndarray, fmark: np.ndarray,
    active: np.ndarray, apos: np.ndarray, free: np.ndarray,
    cap: np.ndarray, lflow: np.ndarray, deg: np.ndarray, lmark: np.ndarray,
    touched: np.ndarray, gleft: np.ndarray, received: np.ndarray, ctr: np.ndarray,
    done: np.ndarray, completed: np.ndarray, scratch: np.ndarray, left: np.ndarray,
    count: np.ndarray, reached: np.ndarray, peak: np.ndarray, reserved: np.ndarray,
    hot: np.ndarray, fin: np.ndarray,
) -> tuple[float, float, int]:
    """Updates from ``now`` on (see module docstring); ``floor`` 0 if flows were added.
    ``peak`` (empty, or one entry per link) records each link's highest load, for
    :mod:`.replay`'s solo runs, and ``fin`` (empty, or one entry per flow slot) the time
    each flow ended. ``reserved`` (empty, or per link: the peak loads of the
    replays on it) makes the run stop after a solve that leaves a reserved link too little
    headroom (``ctr[NHOT]`` > 0, the links in ``hot``), so that replays can be handed over.

    Returns (time of the last update, seconds from it to the next flow end (inf: none),
    number of coflows completed by it, listed in ``completed``).
    """
    t = now
    elapsed = max(now - updated_at, 0.0)
    ctr[NHOT] = 0
    while True:
        resolution = 4.0 * _spacing(max(abs(t), 1.0))
        nd = 0
        for k in range(ctr[NACT]):
            s = active[k]
            rem[s] -= rate[s] * elapsed
            if rem[s] <= DONE_TOLERANCE * size[s] or rem[s] <= rate[s] * resolution:
                done[nd] = s
                nd += 1
                floor = min(floor, rate[s])
        ng = 0
        for i in range(nd):
            s = done[i]
            _drop(s, flink, fpos, nlink, lflow, deg, active, apos, free, touched, lmark, ctr)
            received[dst[s]] += size[s]
            if fin.size > 0:
                fin[s] = t
            ctr[FLOWS_DONE] += 1
            gleft[grp[s]] -= 1
            if gleft[grp[s]] == 0:
                completed[ng] = grp[s]
                ng += 1
        if floor < np.inf:
            ctr[RECOMPUTATIONS] += 1
            nq = _solve(
                floor, rate, flink, nlink, lflow, deg, cap, touched, lmark, fmark, ctr,
                scratch, left, count, reached,
            )
            if peak.size > 0:
                _raise_peaks(reached, nq, rate, lflow, deg, peak)
            if reserved.size > 0:
                _check_reserved(reached, nq, rate, lflow, deg, cap, reserved, hot, ctr)
        for i in range(ctr[NTOUCHED]):
            lmark[touched[i]] = 0
        ctr[NTOUCHED] = 0
        wait = np.inf
        for k in range(ctr[NACT]):
            s = active[k]
            if rate[s] > 0.0:
                wait = min(wait, rem[s] / rate[s])
        if ng > 0 or ctr[NACT] == 0 or ctr[NHOT] > 0:
            return t, wait, ng
        following = t + wait
        if not following < horizon:
            return t, wait, 0
        elapsed = following - t
        t = following
        floor = np.inf


@numba.njit(cache=True, nogil=True)
def rebind(
    fpath: np.ndarray, plinks: np.ndarray, pn: np.ndarray, flink: np.ndarray,
    fpos: np.ndarray, nlink: np.ndarray, lflow: np.ndarray, deg: np.ndarray,
    active: np.ndarray, touched: np.ndarray, lmark: np.ndarray, ctr: np.ndarray,
) -> None:
    """Put every active flow back on its path's (new) binding links."""
    deg[:] = 0
    for k in range(ctr[NACT]):
        s = active[k]
        _place(s, fpath, plinks, pn, flink, fpos, nlink, lflow, deg, touched, lmark, ctr)
