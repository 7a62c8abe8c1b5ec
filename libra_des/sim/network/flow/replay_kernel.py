"""Compiled (numba) bookkeeping of the replays' link reservations (:mod:`.replay`).

A step starts and ends hundreds of thousands of replays at 16,384 GPUs, each over a few
dozen links; as numpy calls, each start, end and admission check was half a dozen
small fancy-indexing operations (about 1 us each). Here each is one pass over the replay's
links, with the same arithmetic per link in the same order (``reserved[l] + peak``,
``reserved[l] - peak``, and the admission sum ``reserved[l] + load(l) + peak``), so results
do not change. Cached on disk like :mod:`.fluid_kernel`.
"""

from __future__ import annotations

import numpy as np

from libra_des.base.kernel import Bools, Floats, Ints, inline_kernel, kernel
from libra_des.sim.network.flow.fluid_kernel import _load
from libra_des.sim.network.flow.tolerances import MARGIN


@kernel
def reserve(links: Ints, peaks: Floats, reserved: Floats,
            replays_on: Ints) -> None:
    """A replay starts: its peak joins each of its (distinct) links' reservation."""
    for i in range(links.size):
        reserved[links[i]] += peaks[i]
        replays_on[links[i]] += 1


@kernel
def release(links: Ints, peaks: Floats, which: Bools, held: Bools,
            reserved: Floats, replays_on: Ints) -> None:
    """A replay lets go of its links where the mask ``which`` is set (``which`` may be
    ``held`` itself; each link is read before it is let go); a link no replay holds any
    more has no reservation, exactly (not the float leftover of adding and subtracting)."""
    for i in range(links.size):
        if not which[i]:
            continue
        link = links[i]
        held[i] = False
        reserved[link] -= peaks[i]
        replays_on[link] -= 1
        if replays_on[link] == 0:
            reserved[link] = 0.0


@inline_kernel
def in_use(link: int, replays_on: Ints, deg: Ints) -> bool:
    """Whether live replays or the network's flows use ``link``."""
    return bool(replays_on[link] > 0 or deg[link] > 0)


@inline_kernel
def too_full(link: int, peak: float, reserved: Floats, cap: Floats,
             rate: Floats, lflow: Ints, deg: Ints) -> bool:
    """Whether ``link``'s reservation, load and ``peak`` leave less than MARGIN of its
    capacity."""
    load = reserved[link] + _load(link, rate, lflow, deg) + peak
    return not load <= cap[link] * (1.0 - MARGIN)


@kernel
def shared(links: Ints, replays_on: Ints, deg: Ints) -> np.ndarray:
    """Positions of the links that live replays or the network's flows also use."""
    out = np.empty(links.size, dtype=np.int64)
    n = 0
    for i in range(links.size):
        if in_use(links[i], replays_on, deg):
            out[n] = i
            n += 1
    return out[:n]


@kernel
def unfit(positions: Ints, links: Ints, peaks: Floats,
          reserved: Floats, cap: Floats, rate: Floats, lflow: Ints,
          deg: Ints) -> np.ndarray:
    """Of the links at ``positions``, those :func:`too_full` for their peak."""
    out = np.empty(positions.size, dtype=np.int64)
    n = 0
    for i in positions:
        if too_full(links[i], peaks[i], reserved, cap, rate, lflow, deg):
            out[n] = links[i]
            n += 1
    return out[:n]


@inline_kernel
def add_to(gpus: Ints, amounts: np.ndarray, totals: np.ndarray) -> None:
    """``totals[gpus] += amounts`` for distinct ``gpus``."""
    for i in range(gpus.size):
        totals[gpus[i]] += amounts[i]


@kernel
def start(links: Ints, peaks: Floats, reserved: Floats, replays_on: Ints,
          gpus: Ints, sent: Floats, bytes_sent: Floats) -> np.ndarray:
    """A replay starts: its peaks are reserved (:func:`reserve`), ``sent[i]`` is added to
    ``bytes_sent[gpus[i]]`` (distinct GPUs); returns the mask of the links it holds (all)."""
    reserve(links, peaks, reserved, replays_on)
    add_to(gpus, sent, bytes_sent)
    return np.ones(links.size, dtype=np.bool_)


@kernel
def start_if_fit(
    links: Ints, peaks: Floats, reserved: Floats, cap: Floats,
    rate: Floats, lflow: Ints, deg: Ints, replays_on: Ints,
    gpus: Ints, sent: Floats, bytes_sent: Floats,
) -> np.ndarray:
    """:func:`start` in the same pass as the check, when the replay fits as things stand:
    no link it shares with live replays or the network's flows is :func:`too_full`.
    Otherwise nothing changes and the mask is empty (a coflow crosses at least one link;
    the caller refreshes stale holds and checks again)."""
    for i in range(links.size):
        if in_use(links[i], replays_on, deg) and too_full(links[i], peaks[i], reserved, cap,
                                                          rate, lflow, deg):
            return np.zeros(0, dtype=np.bool_)
    return start(links, peaks, reserved, replays_on, gpus, sent, bytes_sent)


@kernel
def finish(links: Ints, peaks: Floats, held: Bools, reserved: Floats,
           replays_on: Ints, gpus: Ints, received: Floats,
           bytes_received: Floats) -> None:
    """A replay ends: it lets go of every link it still holds (:func:`release`) and
    ``received[i]`` is added to ``bytes_received[gpus[i]]`` (none for a hand-over)."""
    release(links, peaks, held, held, reserved, replays_on)
    add_to(gpus, received, bytes_received)


@kernel
def per_gpu(gpus: Ints, sizes: Floats) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``gpus`` (ascending) and the bytes each moves: ``sizes`` summed by
    GPU in the order given (``np.unique`` and a weighted ``np.bincount``, in one pass over
    the span of GPU numbers)."""
    if gpus.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    lo, hi = gpus.min(), gpus.max()
    total = np.zeros(hi - lo + 1)
    count = np.zeros(hi - lo + 1, dtype=np.int64)
    for i in range(gpus.size):
        total[gpus[i] - lo] += sizes[i]
        count[gpus[i] - lo] += 1
    ids = np.flatnonzero(count)
    return ids + lo, total[ids]


@kernel
def first_use(ids: Ints, seen: Ints) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``ids`` in order of first appearance, and each entry's index among
    them (``replay.Frame``'s path numbering). ``seen``: scratch holding -1 at every id,
    left so."""
    distinct = np.empty(ids.size, dtype=np.int64)
    local = np.empty(ids.size, dtype=np.int64)
    n = 0
    for i in range(ids.size):
        d = ids[i]
        if seen[d] < 0:
            seen[d] = n
            distinct[n] = d
            n += 1
        local[i] = seen[d]
    for k in range(n):
        seen[distinct[k]] = -1
    return distinct[:n].copy(), local


@kernel
def frame_links(plinks: Ints, paths: Ints,
                seen: Ints) -> tuple[np.ndarray, np.ndarray]:
    """The binding links of ``paths`` (rows of ``plinks``, -1 past a path's last) numbered
    by first use, path by path and along each row (``replay.Frame``'s link numbering): the
    links in that order and the rows in those numbers. ``seen``: scratch holding -1 at every
    link, left so."""
    width = plinks.shape[1]
    rows = np.full((paths.size, width), -1, dtype=np.int64)
    links = np.empty(paths.size * width, dtype=np.int64)
    n = 0
    for i in range(paths.size):
        for j in range(width):
            link = plinks[paths[i], j]
            if link < 0:
                continue
            if seen[link] < 0:
                seen[link] = n
                links[n] = link
                n += 1
            rows[i, j] = seen[link]
    for k in range(n):
        seen[links[k]] = -1
    return links[:n].copy(), rows
