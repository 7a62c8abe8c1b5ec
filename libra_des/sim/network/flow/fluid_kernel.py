"""Compiled (numba) kernels of the flow network's rate bookkeeping (see :mod:`.fluid`).

State lives in arrays owned by :class:`~libra_des.sim.network.flow.fluid.FluidState`:

* flow slots ``s``: bytes left ``rem``, ``size``, ``rate``, receiving GPU ``dst``, coflow
  ``grp``, path ``fpath``, binding links ``flink[s, :nlink[s]]`` and the flow's place in each
  link's list ``fpos``; ``active[:nact]`` lists the live slots (``apos`` is a slot's place),
  ``free[:nfree]`` the free ones;
* links ``l``: capacity ``cap``, live flows ``lflow[l, :deg[l]]``;
* ``gleft[g]``: flows of coflow ``g`` not yet done;
* ``ctr``: [nact, nfree, recomputations, flows done, epoch, touched links, hot links,
  flows a solve moved, the two heaps' sizes].

One *update* is what :class:`~libra_des.sim.network.flow.flow_model.Network` did per rate change,
in the same order and with the same arithmetic where it matters (draining ``rem -= rate *
elapsed``, the done test, the clock-resolution retirement): drain, retire finished flows,
re-solve, find the next end. Max-min rates are re-solved only in the connected component
(flows linked through shared binding links) of the links whose flows changed, and there, after
departures only, only for flows at least as fast as the slowest leaver (below it progressive
filling runs as before: :func:`libra_des.sim.network.solver.refill`'s argument). The solve is
progressive filling level by level, exact up to float round-off.

:func:`run` chains updates while the next flow end comes strictly before ``horizon`` (the next
SimPy event) and no coflow completes: nothing outside the network can act in between, so the
results are those of one SimPy timer per end, without the timers. The chained updates drain
lazily (``since``: the time each flow's ``rem`` holds; a flow is drained when its rate
changes, and all are at the run's end) and take the next end and the flows done from two
heaps (:mod:`.flow_ends`): at 16,384 GPUs an update changes about 10 flow rates of about 560
active flows, whose drain and next-end scans were 62% of the kernel's work. Per flow this
is the same arithmetic up to where round-off falls (results move by about 1e-15).

Imported on the first flow-level run (``fluid.FluidState``); compiled functions are cached
on disk (``cache=True``, in ``base.kernel``'s folder). tests/reference/solver.py
holds the numpy max-min solver it is compared with.
"""

from __future__ import annotations

import math

import numpy as np

from libra_des.base.kernel import Floats, Ints, kernel
from libra_des.sim.network.flow import flow_ends
from libra_des.sim.network.flow.tolerances import DONE_TOLERANCE, MARGIN

#: Flows this close (relative) below a level that is recomputed are recomputed too (ties).
TIE_TOLERANCE = 1e-9
#: Links whose fair share is this close (relative) above the lowest saturate in its round.
LEVEL_TOLERANCE = 1e-12

NACT, NFREE, RECOMPUTATIONS, FLOWS_DONE, EPOCH, NTOUCHED, NHOT, NMOVED = range(8)
#: ``ctr`` entries holding the sizes of the two heaps of flow ends (:func:`run`).
HEAP_SIZE = (8, 9)
COUNTERS = 10
#: The heaps: by end time, and by the time a flow comes within DONE_TOLERANCE of its end.
BY_END, BY_DONE = 0, 1


@kernel
def _spacing(x: float) -> float:
    """np.spacing(x) for x >= 1 (the gap to the next float)."""
    _, exponent = math.frexp(x)
    return math.ldexp(1.0, exponent - 53)


@kernel
def _touch(link: int, touched: Ints, lmark: Ints, ctr: Ints) -> None:
    """Remember ``link`` as changed (once per update; ``lmark`` -1 marks it)."""
    if lmark[link] != -1:
        lmark[link] = -1
        touched[ctr[NTOUCHED]] = link
        ctr[NTOUCHED] += 1


@kernel
def _place(
    s: int, fpath: Ints, plinks: Ints, pn: Ints, flink: Ints,
    fpos: Ints, nlink: Ints, lflow: Ints, deg: Ints,
    touched: Ints, lmark: Ints, ctr: Ints,
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


@kernel
def insert(
    slots: Ints, flink: Ints, fpos: Ints, nlink: Ints,
    fpath: Ints, plinks: Ints, pn: Ints, lflow: Ints,
    deg: Ints, active: Ints, apos: Ints, touched: Ints,
    lmark: Ints, ctr: Ints,
) -> None:
    """Put the flows in ``slots`` (fields other than links already set) on their paths'
    binding links and in the active list."""
    for s in slots:
        _place(s, fpath, plinks, pn, flink, fpos, nlink, lflow, deg, touched, lmark, ctr)
        apos[s] = ctr[NACT]
        active[ctr[NACT]] = s
        ctr[NACT] += 1


@kernel
def _drop(
    s: int, flink: Ints, fpos: Ints, nlink: Ints, lflow: Ints,
    deg: Ints, active: Ints, apos: Ints, free: Ints,
    touched: Ints, lmark: Ints, ctr: Ints,
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


@kernel
def _solve(
    at: float, floor: float, rem: Floats, since: Floats, rate: Floats,
    flink: Ints, nlink: Ints, lflow: Ints, deg: Ints,
    cap: Floats, touched: Ints, lmark: Ints, fmark: Ints,
    ctr: Ints, queue: np.ndarray, left: Floats, count: Ints,
    reached: Ints, moved: Ints, fair: Floats,
) -> int:
    """Max-min rates at time ``at`` of the flows at least as fast as ``floor`` (up to
    TIE_TOLERANCE) connected to the touched links through such flows (see module
    docstring); ``queue``, ``left`` and ``count`` are scratch space of one entry per link. A
    flow whose rate changes is drained to ``at`` first and appended to ``moved``
    (``ctr[NMOVED]`` of them; :func:`run` empties it before each update). When ``reached``
    has room (one entry per link), the links the solve reached are copied there; returns
    how many. ``fair`` (per link) holds each open link's fair share ``left / count`` while
    the levels are filled."""
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
        fair[link] = left[link] / fast if fast > 0 else np.inf
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
        level = min(level, fair[open_links[q]])
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
            share = fair[link]  # left / count, kept up to date as flows freeze
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
                if share != rate[s]:
                    rem[s] -= rate[s] * (at - since[s])
                    since[s] = at
                    moved[ctr[NMOVED]] = s
                    ctr[NMOVED] += 1
                rate[s] = share
                for j in range(nlink[s]):
                    m = flink[s, j]
                    if m != link:
                        left[m] = max(left[m] - share, 0.0)
                        count[m] -= 1
                        if count[m] > 0:
                            fair[m] = left[m] / count[m]
            count[link] = 0
        n = kept
    ctr[EPOCH] += 1
    return nq


@kernel
def _raise_peaks(
    reached: Ints, nq: int, rate: Floats, lflow: Ints, deg: Ints,
    peak: Floats,
) -> None:
    """``peak[l]``: the highest load (sum of its flows' rates) link ``l`` has carried; only
    the links a solve reached can have gained load."""
    for q in range(nq):
        link = reached[q]
        peak[link] = max(peak[link], _load(link, rate, lflow, deg))


@kernel
def _load(link: int, rate: Floats, lflow: Ints, deg: Ints) -> float:
    """The sum of the rates of ``link``'s flows."""
    load = 0.0
    for p in range(deg[link]):
        load += rate[lflow[link, p]]
    return load


@kernel
def loads(
    links: Ints, rate: Floats, lflow: Ints, deg: Ints
) -> np.ndarray:
    """The load of each of ``links`` (bytes/s)."""
    out = np.zeros(links.size)
    for i in range(links.size):
        out[i] = _load(links[i], rate, lflow, deg)
    return out


@kernel
def _check_reserved(
    reached: Ints, nq: int, rate: Floats, lflow: Ints, deg: Ints,
    cap: Floats, reserved: Floats, hot: Ints, ctr: Ints,
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


@kernel
def _keys(s: int, rem: Floats, size: Floats, rate: Floats,
          since: Floats) -> tuple[float, float]:
    """Flow ``s``'s heap keys: when it ends and when it comes within DONE_TOLERANCE of its
    size of the end (inf for a flow at rate 0)."""
    if not rate[s] > 0.0:
        return np.inf, np.inf
    return (since[s] + rem[s] / rate[s],
            since[s] + (rem[s] - DONE_TOLERANCE * size[s]) / rate[s])


@kernel
def _heap_all(rem: Floats, size: Floats, rate: Floats, since: Floats,
              active: Ints, ctr: Ints, hkey: Floats, hslot: Ints,
              hpos: Ints) -> None:
    """Both heaps of every active flow."""
    n = ctr[NACT]
    for k in range(n):
        s = active[k]
        hkey[BY_END, k], hkey[BY_DONE, k] = _keys(s, rem, size, rate, since)
        hslot[BY_END, k] = hslot[BY_DONE, k] = s
    for h in (BY_END, BY_DONE):
        flow_ends.build(hkey, hslot, hpos, h, n)
        ctr[HEAP_SIZE[h]] = n


@kernel
def _rekey_moved(rem: Floats, size: Floats, rate: Floats, since: Floats,
                 moved: Ints, ctr: Ints, hkey: Floats, hslot: Ints,
                 hpos: Ints) -> None:
    """New keys for the flows whose rate the last solve changed."""
    for q in range(ctr[NMOVED]):
        s = moved[q]
        ends = _keys(s, rem, size, rate, since)
        for h in (BY_END, BY_DONE):
            flow_ends.rekey(hkey, hslot, hpos, h, ctr[HEAP_SIZE[h]], s, ends[h])


@kernel
def _due(t: float, resolution: float, rem: Floats, size: Floats, rate: Floats,
         since: Floats, apos: Ints, done: Ints, ctr: Ints,
         hkey: Floats, hslot: Ints, hpos: Ints) -> int:
    """The flows done at ``t`` (the drain's test, on each flow's bytes left at ``t``) into
    ``done``, in active-list order, out of both heaps; returns how many. Only flows whose
    keys say they may be done are tested; one that is not (float round-off) is drained to
    ``t`` and keyed again."""
    nc = 0
    for h in (BY_DONE, BY_END):
        while ctr[HEAP_SIZE[h]] > 0 and hkey[h, 0] <= t + resolution:
            s = hslot[h, 0]
            for g in (BY_END, BY_DONE):
                ctr[HEAP_SIZE[g]] = flow_ends.remove(hkey, hslot, hpos, g, ctr[HEAP_SIZE[g]], s)
            done[nc] = s
            nc += 1
    nd = 0
    for c in range(nc):
        s = done[c]
        left = rem[s] - rate[s] * (t - since[s])
        if left <= DONE_TOLERANCE * size[s] or left <= rate[s] * resolution:
            rem[s] = left
            done[nd] = s
            nd += 1
            continue
        rem[s], since[s] = left, t
        ends = _keys(s, rem, size, rate, since)
        for g in (BY_END, BY_DONE):
            ctr[HEAP_SIZE[g]] = flow_ends.push(hkey, hslot, hpos, g, ctr[HEAP_SIZE[g]], s,
                                               ends[g])
    for i in range(1, nd):  # active-list order, as a drain of the whole list finds them
        s = done[i]
        j = i - 1
        while j >= 0 and apos[done[j]] > apos[s]:
            done[j + 1] = done[j]
            j -= 1
        done[j + 1] = s
    return nd


@kernel
def _settle(t: float, rem: Floats, rate: Floats, since: Floats,
            active: Ints, ctr: Ints) -> float:
    """Drain every active flow to ``t``; the seconds from ``t`` to the next end."""
    wait = np.inf
    for k in range(ctr[NACT]):
        s = active[k]
        if since[s] != t:
            rem[s] -= rate[s] * (t - since[s])
            since[s] = t
        if rate[s] > 0.0:
            wait = min(wait, rem[s] / rate[s])
    return wait


@kernel
def run(
    now: float, updated_at: float, horizon: float, floor: float,
    rem: Floats, size: Floats, rate: Floats, dst: Ints, grp: Ints,
    flink: Ints, fpos: Ints, nlink: Ints, fmark: Ints,
    active: Ints, apos: Ints, free: Ints,
    cap: Floats, lflow: Ints, deg: Ints, lmark: Ints,
    touched: Ints, gleft: Ints, received: Floats, ctr: Ints,
    done: Ints, completed: Ints, scratch: Ints, left: Floats,
    count: Ints, reached: Ints, peak: Floats, reserved: Floats,
    hot: Ints, fin: Floats, since: Floats, hkey: Floats,
    hslot: Ints, hpos: Ints, moved: Ints, fair: Floats,
) -> tuple[float, float, int]:
    """Updates from ``now`` on (see module docstring); ``floor`` 0 if flows were added.
    ``peak`` (empty, or one entry per link) records each link's highest load, for
    :mod:`.replay`'s solo runs, and ``fin`` (empty, or one entry per flow slot) the time
    each flow ended. ``reserved`` (empty, or per link: the peak loads of the
    replays on it) makes the run stop after a solve that leaves a reserved link too little
    headroom (``ctr[NHOT]`` > 0, the links in ``hot``), so that replays can be handed over.

    The first update drains every active flow (``rem`` is each flow's bytes left at
    ``updated_at`` on entry, and at the returned time on return). The updates it chains
    after it are lazy: a flow's ``rem`` holds its bytes left at ``since``, drained only when
    its rate changes, and the next end and the flows done come from two heaps
    (:mod:`.flow_ends`), so an update costs what the flows it changes cost, not what every
    active flow does.

    Returns (time of the last update, seconds from it to the next flow end (inf: none),
    number of coflows completed by it, listed in ``completed``).
    """
    t = now
    elapsed = max(now - updated_at, 0.0)
    ctr[NHOT] = 0
    lazy = False
    while True:
        resolution = 4.0 * _spacing(max(abs(t), 1.0))
        nd = 0
        if lazy:
            nd = _due(t, resolution, rem, size, rate, since, apos, done, ctr, hkey, hslot, hpos)
        else:
            for k in range(ctr[NACT]):
                s = active[k]
                rem[s] -= rate[s] * elapsed
                since[s] = t
                if rem[s] <= DONE_TOLERANCE * size[s] or rem[s] <= rate[s] * resolution:
                    done[nd] = s
                    nd += 1
        ng = 0
        for i in range(nd):
            s = done[i]
            floor = min(floor, rate[s])
            _drop(s, flink, fpos, nlink, lflow, deg, active, apos, free, touched, lmark, ctr)
            received[dst[s]] += size[s]
            if fin.size > 0:
                fin[s] = t
            ctr[FLOWS_DONE] += 1
            gleft[grp[s]] -= 1
            if gleft[grp[s]] == 0:
                completed[ng] = grp[s]
                ng += 1
        ctr[NMOVED] = 0
        if floor < np.inf:
            ctr[RECOMPUTATIONS] += 1
            nq = _solve(
                t, floor, rem, since, rate, flink, nlink, lflow, deg, cap, touched, lmark,
                fmark, ctr, scratch, left, count, reached, moved, fair,
            )
            if peak.size > 0:
                _raise_peaks(reached, nq, rate, lflow, deg, peak)
            if reserved.size > 0:
                _check_reserved(reached, nq, rate, lflow, deg, cap, reserved, hot, ctr)
        for i in range(ctr[NTOUCHED]):
            lmark[touched[i]] = 0
        ctr[NTOUCHED] = 0
        if ng > 0 or ctr[NACT] == 0 or ctr[NHOT] > 0:
            return t, _settle(t, rem, rate, since, active, ctr), ng
        if lazy:
            _rekey_moved(rem, size, rate, since, moved, ctr, hkey, hslot, hpos)
        else:
            _heap_all(rem, size, rate, since, active, ctr, hkey, hslot, hpos)
            lazy = True
        following = hkey[BY_END, 0]
        if not following < horizon:
            return t, _settle(t, rem, rate, since, active, ctr), 0
        t = following
        floor = np.inf


@kernel
def rebind(
    fpath: Ints, plinks: Ints, pn: Ints, flink: Ints,
    fpos: Ints, nlink: Ints, lflow: Ints, deg: Ints,
    active: Ints, touched: Ints, lmark: Ints, ctr: Ints,
) -> None:
    """Put every active flow back on its path's (new) binding links."""
    deg[:] = 0
    for k in range(ctr[NACT]):
        s = active[k]
        _place(s, fpath, plinks, pn, flink, fpos, nlink, lflow, deg, touched, lmark, ctr)


@kernel
def room_needed(plinks: Ints, pn: Ints, paths: Ints, deg: Ints,
                base: int, tally: Ints) -> int:
    """The longest flow list any binding link needs once flows on ``paths`` join it (``base``
    0: counting from empty lists); ``tally`` is scratch of one entry per link (``count``,
    which solves set before they read it)."""
    for p in paths:
        for j in range(pn[p]):
            tally[plinks[p, j]] = deg[plinks[p, j]] if base else 0
    need = 0
    for p in paths:
        for j in range(pn[p]):
            link = plinks[p, j]
            tally[link] += 1
            need = max(need, tally[link])
    return need


@kernel
def last_ends(plinks: Ints, pn: Ints, paths: Ints, fin: Floats,
              links: int) -> np.ndarray:
    """Per link, the latest ``fin`` of the flows (flow ``i`` on path ``paths[i]``) whose
    binding links (the first ``pn`` of the path's row) include it (0 where none)."""
    last = np.zeros(links)
    for i in range(paths.size):
        for j in range(pn[paths[i]]):
            link = plinks[paths[i], j]
            last[link] = max(last[link], fin[i])
    return last

