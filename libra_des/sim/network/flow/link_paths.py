"""Which of the flow network's paths cross each link: an index kept as paths are numbered.

When a link's binding status flips (:class:`~libra_des.sim.network.flow.link_table.LinkTable`),
the paths over it must be re-packed and their replays' solo runs go stale
(:mod:`.replay`). Scanning every known path's route for the flipped links cost the number
of paths per flip, and flips come with new routes: at 16,384 GPUs about a million paths were
scanned for a few dozen hits, hundreds of times a step. The index answers in the size of
the answer instead.

Per link, a chain of entries (newest first): ``head[link]`` is its latest entry, each entry
holds a path and the next entry of the same link (-1 ends a chain). A path is entered once
per link of its route (every link, binding or not: a link's status can flip either way).
Paths never change their routes, so entries are only ever added. Compiled (numba), cached
on disk like :mod:`.fluid_kernel`.
"""

from __future__ import annotations

import numpy as np

from libra_des.base.kernel import Int32s, Ints, kernel


@kernel
def enter(routes: Ints, start: int, stop: int, head: Ints, path: Int32s, nxt: Int32s,
          n: int) -> int:
    """Enter paths ``start .. stop - 1`` (rows of ``routes``: links, padded on the right
    with -1) after the first ``n`` entries; returns the new number of entries (the entry
    arrays have room)."""
    for p in range(start, stop):
        for j in range(routes.shape[1]):
            link = routes[p, j]
            if link < 0:
                break
            path[n] = p
            nxt[n] = head[link]
            head[link] = n
            n += 1
    return n


@kernel
def crossing(links: Ints, head: Ints, path: Int32s, nxt: Int32s, below: int) -> Ints:
    """The paths numbered below ``below`` that cross one of ``links``, each once,
    ascending."""
    total = 0
    for link in links:
        e = head[link]
        while e >= 0:
            total += 1
            e = nxt[e]
    out = np.empty(total, dtype=np.int64)
    n = 0
    for link in links:
        e = head[link]
        while e >= 0:
            if path[e] < below:
                out[n] = path[e]
                n += 1
            e = nxt[e]
    return np.unique(out[:n])


class LinkPaths:
    """The index (module docstring): :meth:`enter` paths as they are numbered, ask
    :meth:`crossing`."""

    def __init__(self) -> None:
        self.head = np.full(0, -1, dtype=np.int64)
        self.path = np.zeros(0, dtype=np.int32)
        self.nxt = np.zeros(0, dtype=np.int32)
        self.entries = 0
        self.paths = 0  # paths entered: rows 0 .. paths - 1 of the routes

    def enter(self, routes: Ints, paths: int, links: int) -> None:
        """Enter the paths from the last one entered up to ``paths`` (rows of ``routes``),
        over a network of ``links`` links."""
        if links > self.head.size:
            head = np.full(links + links // 4, -1, dtype=np.int64)
            head[: self.head.size] = self.head
            self.head = head
        need = self.entries + (paths - self.paths) * routes.shape[1]
        if need > self.path.size:
            # Doubling: paths come a few hundred at a time.
            size = max(need, 2 * self.path.size)
            self.path = np.concatenate([self.path, np.zeros(size - self.path.size, np.int32)])
            self.nxt = np.concatenate([self.nxt, np.zeros(size - self.nxt.size, np.int32)])
        self.entries = enter(routes, self.paths, paths, self.head, self.path, self.nxt,
                             self.entries)
        self.paths = paths

    def crossing(self, links: Ints, below: int) -> Ints:
        """The paths numbered below ``below`` crossing one of ``links``, ascending."""
        known = links[links < self.head.size]
        return np.asarray(crossing(known, self.head, self.path, self.nxt, below))
