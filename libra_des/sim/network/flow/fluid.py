"""Array state of the flow network's active flows, advanced by compiled kernels.

:class:`FluidState` holds what :mod:`.fluid_kernel` works on (its docstring lists the arrays)
and grows them as flows, links, paths and coflows appear. Flows belong to *coflows*: a
coflow's flows are only seen together, so the network reports a coflow when its last flow
ends (a single transfer is a coflow of one). That lets the kernel process the ends of a
coflow's other flows without handing control back to the event loop.

Paths are numbered by the network; ``routes[p]`` lists path ``p``'s links, of which only the
binding ones (:class:`~libra_des.sim.network.flow.link_table.LinkTable`) constrain rates.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

#: Arrays that grow by rows get 1/GROWTH of their new size as headroom (our assumption).
GROWTH = 4


def _grow(array: np.ndarray, rows: int, cols: int | None = None, fill: float = 0) -> np.ndarray:
    """``array`` padded with ``fill`` to ``rows`` rows (and ``cols`` columns if 2-D)."""
    shape = (rows,) if array.ndim == 1 else (rows, cols if cols is not None else array.shape[1])
    out = np.full(shape, fill, dtype=array.dtype)
    out[tuple(slice(0, n) for n in array.shape)] = array
    return out


class FluidState:
    """Active flows, links, paths and coflows as arrays (see module docstring)."""

    def __init__(self, received: np.ndarray, slots: int = 64) -> None:
        from libra_des.sim.network.flow import fluid_kernel  # lazy: numba's import is costly
        from libra_des.sim.network.flow.link_paths import LinkPaths

        self.kernel: ModuleType = fluid_kernel
        self.received = received  # bytes received per GPU, updated in place
        slots, width = max(slots, 1), 4
        self.rem, self.size, self.rate = np.zeros(slots), np.zeros(slots), np.zeros(slots)
        self.dst, self.grp, self.fpath = (np.zeros(slots, dtype=np.int64) for _ in range(3))
        self.nlink, self.fmark, self.apos = (np.zeros(slots, dtype=np.int64) for _ in range(3))
        self.flink = np.zeros((slots, width), dtype=np.int64)
        self.fpos = np.zeros((slots, width), dtype=np.int64)
        self.active = np.zeros(slots, dtype=np.int64)
        self.free = np.arange(slots - 1, -1, -1, dtype=np.int64)
        self.done = np.zeros(slots, dtype=np.int64)
        self.completed = np.zeros(slots, dtype=np.int64)
        self.cap = np.zeros(0)
        self.lflow = np.zeros((0, 8), dtype=np.int64)
        self.deg, self.lmark, self.touched, self.scratch, self.count = (
            np.zeros(0, dtype=np.int64) for _ in range(5)
        )
        self.left, self.fair = np.zeros(0), np.zeros(0)
        self.plinks = np.full((0, width), -1, dtype=np.int64)
        self.routes = np.full((0, width), -1, dtype=np.int64)  # every path's links, padded
        self.pn = np.zeros(0, dtype=np.int64)
        self.paths = 0  # paths known (rows of ``routes``, ``plinks`` and ``pn`` in use)
        self.link_paths = LinkPaths()  # which known paths cross each link
        self.gleft = np.zeros(64, dtype=np.int64)
        self.groups = 0
        # Solo runs (:meth:`solo`) record each link's peak load; the shared network does not.
        self.reached, self.peak = np.zeros(0, dtype=np.int64), np.zeros(0)
        self.fin = np.zeros(0)  # solo runs: each flow slot's end time
        # With replays (:meth:`watch_reserved`): their peak loads per link, and the links a
        # run found short of headroom.
        self.reserved, self.hot = np.zeros(0), np.zeros(0, dtype=np.int64)
        self.watching = False
        self.ctr = np.zeros(fluid_kernel.COUNTERS, dtype=np.int64)
        self._scratch(slots)
        self.ctr[fluid_kernel.NFREE] = slots

    def solo(self, cap: np.ndarray, plinks: np.ndarray, pn: np.ndarray, flows: int) -> FluidState:
        """An empty state for running one coflow of ``flows`` flows alone (:mod:`.replay`)
        that records link peak loads, on the coflow's own links (capacities ``cap``) and
        paths (``plinks``, ``pn``, numbered among them): its work and memory do not grow
        with the network."""
        other = FluidState(np.zeros_like(self.received), flows)
        other.set_links(cap)
        other.plinks, other.pn = plinks, pn  # read-only in the kernels
        other._widen(plinks.shape[1])
        other.reached = np.zeros(cap.size, dtype=np.int64)
        other.peak = np.zeros(cap.size)
        other.fin = np.full(other.rem.size, np.inf)
        return other

    @property
    def active_flows(self) -> int:
        return int(self.ctr[self.kernel.NACT])

    @property
    def recomputations(self) -> int:
        return int(self.ctr[self.kernel.RECOMPUTATIONS])

    @property
    def flows_done(self) -> int:
        return int(self.ctr[self.kernel.FLOWS_DONE])

    # ------------------------------------------------------------------ growth
    def group(self, flows: int) -> int:
        """A new coflow of ``flows`` flows; its number."""
        if self.groups == self.gleft.size:
            self.gleft = _grow(self.gleft, 2 * self.groups)
        self.gleft[self.groups] = flows
        self.groups += 1
        return self.groups - 1

    def set_links(self, capacity: np.ndarray) -> None:
        """Link capacities (bytes/s), numbered as the link table numbers them."""
        n = capacity.size
        if n > self.deg.size:
            # A quarter of headroom: the network numbers links a few at a time, each copy of
            # the per-link arrays costs their whole size (``lflow`` is links x flows, the
            # largest array at scale), and more headroom would cost memory.
            rows = n + n // GROWTH
            self.lflow = _grow(self.lflow, rows)
            self.deg, self.lmark, self.touched, self.scratch, self.count = (
                _grow(a, rows) for a in (self.deg, self.lmark, self.touched, self.scratch,
                                         self.count)
            )
            self.left, self.fair = _grow(self.left, rows), _grow(self.fair, rows)
        self.cap = np.array(capacity, dtype=float)
        if self.watching:
            self.watch_reserved()

    def watch_reserved(self) -> None:
        """Make runs check the links replays reserve (:mod:`.replay`): one entry per link
        in ``reserved``, ``reached`` and ``hot`` (grown with the links)."""
        self.watching = True
        if self.reserved.size < self.cap.size:
            self.reserved = _grow(self.reserved, self.cap.size)
            self.reached = np.zeros(self.cap.size, dtype=np.int64)
            self.hot = np.zeros(self.cap.size, dtype=np.int64)

    @property
    def hot_links(self) -> np.ndarray:
        """Links the last run left short of headroom for their replays."""
        return self.hot[: self.ctr[self.kernel.NHOT]]

    def set_paths(
        self, routes: list[np.ndarray], binding: np.ndarray, every: bool, flipped: np.ndarray
    ) -> np.ndarray:
        """Binding links of the paths not seen yet and (``every``: ``binding`` changed) of
        the paths crossing a link in ``flipped``, the links whose binding changed; the active
        flows are then moved onto their new binding links. A path whose links all kept their
        status keeps its packed row, so this equals re-packing every path. Returns the
        paths seen before whose binding links changed."""
        known = self.paths
        width = max([self.plinks.shape[1], *(r.size for r in routes[known:])])
        if len(routes) > self.pn.size or width > self.plinks.shape[1]:
            # Headroom, as for the links: paths come a few hundred at a time.
            size = len(routes) + len(routes) // GROWTH
            self.routes = _grow(self.routes, size, width, -1)
            self.plinks = _grow(self.plinks, size, width, -1)
            self.pn = _grow(self.pn, size)
        for p in range(known, len(routes)):
            self.routes[p, : routes[p].size] = routes[p]
        self.paths = len(routes)
        self.link_paths.enter(self.routes, self.paths, binding.size)
        self._widen(width)
        rows = np.arange(known, len(routes))  # the new paths
        rebound = rows[:0]
        if every and flipped.size:
            rebound = self.link_paths.crossing(flipped, known)
            rows = np.concatenate([rebound, rows])
        # Each path's binding links, in route order, packed to the left of its row.
        hops = self.routes[rows]
        binds = (hops >= 0) & binding[np.maximum(hops, 0)]
        order = np.argsort(~binds, axis=1, kind="stable")
        packed = np.take_along_axis(hops, order, axis=1)
        packed[~np.take_along_axis(binds, order, axis=1)] = -1
        self.plinks[rows] = packed
        self.pn[rows] = binds.sum(axis=1)
        if every:
            live = self.active[: self.active_flows]
            self._fit_links(self.fpath[live], 0)
            self.kernel.rebind(
                self.fpath, self.plinks, self.pn, self.flink, self.fpos, self.nlink,
                self.lflow, self.deg, self.active, self.touched, self.lmark, self.ctr,
            )
        return rebound

    def _widen(self, width: int) -> None:
        if width > self.flink.shape[1]:
            self.flink = _grow(self.flink, self.flink.shape[0], width)
            self.fpos = _grow(self.fpos, self.fpos.shape[0], width)

    def _fit_links(self, paths: np.ndarray, base: int) -> None:
        """Make room in the links' flow lists for flows on ``paths`` (``base``: 0 to count
        from empty lists, else from the current ones)."""
        # Only the links the new flows cross: the whole table is far larger at scale.
        need = self.kernel.room_needed(self.plinks, self.pn, paths, self.deg, base,
                                       self.count)
        if need > self.lflow.shape[1]:
            self.lflow = _grow(self.lflow, self.lflow.shape[0], 2 * need)

    def _scratch(self, slots: int) -> None:
        """Per-flow arrays one kernel run uses and leaves (its lazy drain's times, its
        heaps of flow ends, the flows a solve changed): nothing to keep when they grow."""
        self.since, self.moved = np.zeros(slots), np.zeros(slots, dtype=np.int64)
        self.hkey = np.zeros((2, slots))
        self.hslot = np.zeros((2, slots), dtype=np.int64)
        self.hpos = np.zeros((2, slots), dtype=np.int64)

    def _fit_flows(self, extra: int) -> None:
        if extra <= self.ctr[self.kernel.NFREE]:
            return
        old = self.rem.size
        new = 2 * max(old, self.active_flows + extra)
        for name in ("rem", "size", "rate", "dst", "grp", "fpath", "nlink", "fmark", "apos",
                     "flink", "fpos", "active", "done", "completed"):
            setattr(self, name, _grow(getattr(self, name), new))
        if self.fin.size:
            self.fin = _grow(self.fin, new, fill=np.inf)
        self._scratch(new)
        nfree = int(self.ctr[self.kernel.NFREE])
        free = np.zeros(new, dtype=np.int64)
        free[:nfree] = self.free[:nfree]
        free[nfree : nfree + new - old] = np.arange(new - 1, old - 1, -1)
        self.free = free
        self.ctr[self.kernel.NFREE] = nfree + new - old

    # ------------------------------------------------------------------ flows
    def add(
        self, paths: np.ndarray, sizes: np.ndarray, dsts: np.ndarray, groups: np.ndarray,
        left: np.ndarray | None = None,
    ) -> None:
        """Start flows (path numbers, bytes, receiving GPUs, coflows), oldest first;
        ``left``: bytes still to send, if some were sent elsewhere (:mod:`.replay`)."""
        n = paths.size
        self._fit_flows(n)
        self._fit_links(paths, 1)
        nfree = int(self.ctr[self.kernel.NFREE])
        slots = self.free[nfree - n : nfree][::-1].copy()
        self.ctr[self.kernel.NFREE] = nfree - n
        self.rem[slots] = sizes if left is None else left
        self.size[slots] = sizes
        self.rate[slots] = 0.0
        self.dst[slots] = dsts
        self.grp[slots] = groups
        self.fpath[slots] = paths
        self.kernel.insert(
            slots, self.flink, self.fpos, self.nlink, self.fpath, self.plinks, self.pn,
            self.lflow, self.deg, self.active, self.apos, self.touched, self.lmark, self.ctr,
        )

    def loads(self, links: np.ndarray) -> np.ndarray:
        """Each link's load now (bytes/s)."""
        return np.asarray(self.kernel.loads(links, self.rate, self.lflow, self.deg))

    def run(
        self, now: float, updated_at: float, horizon: float, floor: float
    ) -> tuple[float, float, np.ndarray]:
        """:func:`fluid_kernel.run`: (time of the last update, seconds to the next end after
        it, the coflows it completed, oldest first)."""
        t, wait, n = self.kernel.run(
            now, updated_at, horizon, floor, self.rem, self.size, self.rate, self.dst,
            self.grp, self.flink, self.fpos, self.nlink, self.fmark, self.active, self.apos,
            self.free, self.cap, self.lflow, self.deg, self.lmark, self.touched, self.gleft,
            self.received, self.ctr, self.done, self.completed, self.scratch, self.left,
            self.count, self.reached, self.peak, self.reserved, self.hot, self.fin,
            self.since, self.hkey, self.hslot, self.hpos, self.moved, self.fair,
        )
        return t, wait, np.sort(self.completed[:n])
