"""All-to-alls that nothing interacts with are run alone once and replayed.

A training step repeats the same all-to-all(v) many times: every layer of a microbatch
exchanges the same byte matrix over the same GPUs (at 128 GPUs on the quickstart layout,
6,144 all-to-alls with 128 distinct matrices). What such a coflow does in the flow network
depends only on its matrix, its routes and the link capacities, *as long as nothing else
competes with it*. This module runs each distinct coflow once in a private
:class:`~libra_des.sim.network.flow.fluid.FluidState` (a *solo run*), records when it completes
and the highest load it puts on each binding link, and replays that: one SimPy timeout
instead of thousands of rate recomputations.

When is a replay exact? Let coflow A's solo allocation put at most ``peak_A(l)`` on link
``l``. If, at every instant of A's life, ``peak_A(l)`` plus the peaks of the other live
replays on ``l`` plus the load the shared network's flows put on ``l`` stays below ``cap(l)``
on every link they share, no shared link saturates in the union of the separate allocations.
That union is feasible, and every flow keeps a bottleneck link on which it is among the
fastest (one it saturates alone, in its own allocation, which no other flow crosses). So the
union is the max-min fair allocation of the whole network, and A runs as it ran alone.

The check runs when a replay starts (against the network's current loads) and after every
rate solve of the shared network (in the compiled kernel, on the links the solve reached:
loads change nowhere else). A replay reserves its peak on a link only until its last flow
there ends in the solo run (``Profile.leaves``; afterwards it puts nothing there). Letting
go is lazy: where a check fails, the replays on the failing links first give up the links
they have left, and the check is made again; only links still short count. A reservation
held past its end is conservative, never wrong.

Solo runs work on the coflow's own links and paths, renumbered in the same order
(:class:`Frame`): their arrays and arithmetic do not depend on the size of the network. So
coflows of other groups of GPUs whose frames are equal (the same matrix over links alike in
capacity and in how the paths cross them: the pools of a large cluster) share one solo run:
a run reads nothing but its frame, so the results are the same bit for bit.

New routes can change which links bind (:class:`~libra_des.sim.network.flow.link_table.
LinkTable`). Only the coflows over a path whose binding links changed are affected: their
profiles go stale and their live replays are handed over; a coflow none of whose paths
changed keeps its frame, so its solo run and its replay stay exact.

If a check fails, the replays on the links short of headroom are
*handed over* at that instant: their solo runs are repeated up to it, and their unfinished
flows, with the bytes they still have to send, join the shared network (flows still waiting
for their route latency join when it has passed), which solves again. From then on they are
solved like any other coflow. Results agree with never replaying up to float round-off (solo
runs count time from the coflow's start), which the tests check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from types import ModuleType

import numpy as np
import simpy

from libra_des.sim.network.flow.fluid import FluidState
from libra_des.sim.network.flow.tolerances import MARGIN

#: Flows to start together: path numbers, bytes, receiving GPUs, coflows.
Flows = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]

#: Batches of one coflow's flows by route latency: (seconds after the call, flows).
Batches = list[tuple[float, Flows]]
#: Distinct GPUs (ascending) and the bytes each moves (``replay_kernel.per_gpu``).
PerGpu = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class Frame:
    """A coflow's own part of the network, numbered for its solo runs: the binding links
    its flows cross (global numbers; a local link is its index here) with their
    capacities, its paths (global numbers; a local path is its index) with their binding
    links in local numbers, and its flows by latency on local paths.

    Local numbers follow first use, not global numbers (which follow the order routes were
    first seen in the run): paths in the order of the coflow's flows, links path by path
    along each path. The same coflow on another group of GPUs with the same shape (another
    pool, another rack) then reads the same local network, and one solo run serves both
    (:attr:`key`). A solo run's arithmetic is in that order, which differs from the shared
    network's by rounding only."""

    links: np.ndarray
    cap: np.ndarray
    paths: np.ndarray
    plinks: np.ndarray
    pn: np.ndarray
    batches: Batches

    @classmethod
    def of(cls, template: FluidState, batches: Batches, numbering: Numbering) -> Frame:
        seen = numbering.fit(template)
        every = np.concatenate([flows[0] for _, flows in batches])
        paths, local = seen.kernel.first_use(every, seen.paths)
        links, plinks = seen.kernel.frame_links(template.plinks, paths, seen.links)
        out: Batches = []
        at = 0
        for delay, (p, s, d, g) in batches:
            out.append((delay, (local[at : at + p.size], s, d, g)))
            at += p.size
        return cls(links, template.cap[links].copy(), paths, plinks, template.pn[paths].copy(),
                   out)

    @cached_property
    def flows(self) -> int:
        """Flows in all batches (read at every replay's end: counted once)."""
        return sum(flows[0].size for _, flows in self.batches)

    @property
    def key(self) -> bytes:
        """Everything a solo run of this frame reads, as bytes: the local links' capacities,
        the paths' binding links, and per batch its delay and its flows' local paths and
        sizes, in order. Two frames with one key run alone identically, bit for bit (the
        receiving GPUs only count bytes received)."""
        parts = [np.asarray(self.plinks.shape, dtype=np.int64), self.cap, self.plinks, self.pn]
        for delay, (paths, sizes, _, _) in self.batches:
            parts += [np.asarray([delay, paths.size], dtype=float), paths, sizes]
        return b"".join(np.ascontiguousarray(part).tobytes() for part in parts)


@dataclass
class Numbering:
    """What :meth:`Frame.of` numbers with: the compiled first-use kernels
    (``replay_kernel.first_use``, ``frame_links``) and their scratch, -1 at every path and
    link number so far (grown with the network)."""

    kernel: ModuleType
    paths: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    links: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def fit(self, template: FluidState) -> Numbering:
        """Room for every path and link ``template`` knows."""
        self.paths = minus_ones(self.paths, template.plinks.shape[0])
        self.links = minus_ones(self.links, template.cap.size)
        return self


def minus_ones(seen: np.ndarray, size: int) -> np.ndarray:
    """``seen`` grown to ``size`` with -1s."""
    if seen.size >= size:
        return seen
    return np.concatenate([seen, np.full(size - seen.size, -1, dtype=np.int64)])


@dataclass(frozen=True)
class Profile:
    """What a coflow does alone: its makespan (seconds from the call), the binding links it
    crosses, the highest load (bytes/s) it puts on each and when it leaves each (``leaves``:
    seconds from the call to the end of its last flow there); its flows by latency (coflow
    number -1) in its :class:`Frame`, and the bytes each GPU sends and receives (GPU ids,
    totals)."""

    makespan: float
    links: np.ndarray
    peaks: np.ndarray
    leaves: np.ndarray
    frame: Frame
    sent: PerGpu
    received: PerGpu

    @property
    def batches(self) -> Batches:
        """The flows by latency, on global path numbers."""
        paths = self.frame.paths
        return [(delay, (paths[p], s, d, g)) for delay, (p, s, d, g) in self.frame.batches]

    @property
    def flows(self) -> int:
        return self.frame.flows


@dataclass(eq=False)
class Replay:
    """A coflow running as a replay of its solo run, started at ``start``. Compared by
    identity: two replays started at one instant from alike profiles are still two (field
    by field, ``list.remove`` would compare the profiles' arrays)."""

    start: float
    profile: Profile
    done: simpy.Event
    #: Which of the profile's links it still holds (reserves).
    held: np.ndarray
    live: bool = True


@dataclass
class Handover:
    """A replay's state when it joins the shared network: its unfinished flows (with
    ``left`` bytes still to send), the batches still waiting for their latency (delays from
    now), the bytes each GPU received so far and the flows already done."""

    flows: Flows
    left: np.ndarray
    pending: Batches
    received: np.ndarray
    finished: int


def run_alone(
    template: FluidState, frame: Frame, until: float
) -> tuple[FluidState, float, bool]:
    """The coflow's batches run alone from time 0 until it completes or until ``until``
    (batches arriving at or after ``until`` are not started): the solo state (on the
    frame's local numbers), the time of its last update and whether the coflow completed."""
    batches = frame.batches
    solo = template.solo(frame.cap, frame.plinks, frame.pn, frame.flows)
    group = solo.group(frame.flows)
    updated = 0.0
    for i, (delay, (paths, sizes, dsts, _)) in enumerate(batches):
        if not delay < until:
            break
        solo.add(paths, sizes, dsts, np.full(paths.size, group))
        horizon = min(batches[i + 1][0] if i + 1 < len(batches) else np.inf, until)
        updated, _, completed = solo.run(delay, updated, horizon, 0.0)
        if completed.size:
            return solo, updated, True
    if until < np.inf:
        updated, _, completed = solo.run(until, updated, until, np.inf)
        return solo, updated, bool(completed.size)
    return solo, updated, False


#: What a solo run gives a profile: makespan, peak load and leaving time per local link.
Solo = tuple[float, np.ndarray, np.ndarray]


def profile_of(
    template: FluidState, batches: Batches, moved: tuple[PerGpu, PerGpu],
    solos: dict[bytes, Solo], numbering: Numbering,
) -> tuple[Profile, int]:
    """Run the coflow alone to its end (``moved``: the bytes each GPU sends and receives):
    what a replay needs, and the solves it took. ``solos`` holds solo runs by
    :attr:`Frame.key`: a frame seen before (another group of GPUs with the same local
    links, paths and flows) takes its results without running (0 solves)."""
    frame = Frame.of(template, batches, numbering)
    key = frame.key
    found = solos.get(key)
    solves = 0
    if found is None:
        solo, makespan, completed = run_alone(template, frame, np.inf)
        assert completed, "a coflow alone always completes"
        found = (makespan, solo.peak.copy(), leaves_of(solo, frame, solo.fin[: frame.flows]))
        solves = solo.recomputations
        solos[key] = found
    makespan, peaks, leaves = found
    return Profile(makespan, frame.links, peaks, leaves, frame, *moved), solves


def leaves_of(solo: FluidState, frame: Frame, fin: np.ndarray) -> np.ndarray:
    """When the coflow leaves each of its links: the end of the last of its flows there
    (``fin``: each flow's end, in frame order; a fresh solo state gives flow ``i`` slot
    ``i``; ``solo``: that state, for its kernels). After that instant its solo allocation
    puts nothing on the link."""
    paths = np.concatenate([flows[0] for _, flows in frame.batches])
    return np.asarray(solo.kernel.last_ends(frame.plinks, frame.pn, paths, fin, frame.links.size))


@dataclass(eq=False)
class Entry:
    """A profile as the book keeps it: its matrix, and the rebinding it was last known
    valid at (see :meth:`ReplayBook.rebind`)."""

    matrix: np.ndarray
    profile: Profile
    valid: int


#: Read-only matrices a group's finds remember by identity (a pool's dispatch and return).
RECENT = 2


class ReplayBook:
    """Profiles by coflow, the live replays, and their reservations on the shared network's
    links (``state.reserved``: the sum of the live replays' peaks on each link)."""

    def __init__(self, state: FluidState) -> None:
        from libra_des.sim.network.flow import replay_kernel  # lazy: numba's import is costly

        self.kernel: ModuleType = replay_kernel
        self.state = state
        state.watch_reserved()
        # Profiles by GPUs and matrix sum; the matrix itself tells apart those that collide.
        self.profiles: dict[tuple[tuple[int, ...], float], list[Entry]] = {}
        # Rebindings so far, and per path the last one that changed its binding links.
        self.rebinds = 0
        self.rebound_at = np.zeros(0, dtype=np.int64)
        # In start order (a dict: an end takes its replay out without a scan).
        self.live: dict[Replay, None] = {}
        # Live replays per link: a link with none has no reservation, exactly (not a float
        # leftover of adding and subtracting peaks).
        self.replays_on = np.zeros(0, dtype=np.int64)
        self.replayed = self.handed = self.solo_runs = self.solo_solves = 0
        # Solo runs by frame (:attr:`Frame.key`): groups of GPUs whose coflows look alike
        # locally share one; ``solo_shared`` counts the profiles that took one.
        self.solos: dict[bytes, Solo] = {}
        # Per group, the last RECENT matrices found and their entries, for a caller that
        # passes one read-only array per exchange again and again (its content cannot have
        # changed): a pool's dispatch and return alternate.
        self.last: dict[tuple[int, ...], list[tuple[np.ndarray, Entry]]] = {}
        self.numbering = Numbering(replay_kernel)
        self.solo_shared = 0

    def find(self, ranks: tuple[int, ...], matrix: np.ndarray) -> Profile | None:
        """The profile of this all-to-all, if one was made and no rebinding has changed
        its paths since (a stale one is dropped). The matrix found last for these GPUs,
        passed again as the same read-only array with no rebinding since, is found without
        summing or comparing it."""
        for seen, known in self.last.get(ranks, ()):
            if seen is matrix and known.valid == self.rebinds:
                return known.profile
        entries = self.profiles.get((ranks, float(matrix.sum())), [])
        for entry in entries:
            if not (entry.matrix == matrix).all():  # one shape: the key holds the ranks
                continue
            if entry.valid < self.rebinds:
                if self.changed_since(entry.profile, entry.valid):
                    entries.remove(entry)
                    return None
                entry.valid = self.rebinds
            if not matrix.flags.writeable and matrix.base is None:
                self.remember(ranks, matrix, entry)
            return entry.profile
        return None

    def remember(self, ranks: tuple[int, ...], matrix: np.ndarray, entry: Entry) -> None:
        """Keep a read-only matrix found for ``ranks`` among the group's RECENT ones (once:
        found again after a re-validation, it would push the other one out)."""
        recent = self.last.setdefault(ranks, [])
        if all(seen is not matrix for seen, _ in recent):
            recent.insert(0, (matrix, entry))
            del recent[RECENT:]

    def make(
        self, ranks: tuple[int, ...], matrix: np.ndarray, batches: Batches,
        senders: np.ndarray, sizes: np.ndarray,
    ) -> Profile:
        """Run the all-to-all alone and keep its profile (``senders``: each flow's sending
        GPU, ``sizes``: its bytes)."""
        # Received bytes summed in the batches' order (flows by latency), as they arrive.
        by_batch, dsts = (np.concatenate([flows[k] for _, flows in batches]) for k in (1, 2))
        moved = (self.kernel.per_gpu(senders, sizes), self.kernel.per_gpu(dsts, by_batch))
        profile, solves = profile_of(self.state, batches, moved, self.solos, self.numbering)
        self.solo_runs += int(solves > 0)
        self.solo_shared += int(solves == 0)
        self.solo_solves += solves
        self.profiles.setdefault((ranks, float(matrix.sum())), []).append(
            Entry(np.array(matrix, dtype=float), profile, self.rebinds)
        )
        return profile

    def fit(self) -> None:
        """Room for every link the state knows."""
        self.state.watch_reserved()
        extra = self.state.cap.size - self.replays_on.size
        if extra > 0:
            self.replays_on = np.concatenate([self.replays_on, np.zeros(extra, dtype=np.int64)])

    def rebind(self, paths: np.ndarray) -> list[Replay]:
        """The binding links of ``paths`` changed: their coflows' solo runs may differ, so
        profiles over them go stale (dropped when next found) and the live replays over
        them are returned, to be handed over. A coflow none of whose paths changed keeps
        its frame, hence its solo run, exactly."""
        if not paths.size:
            return []
        self.rebinds += 1
        extra = self.state.paths - self.rebound_at.size
        if extra > 0:
            self.rebound_at = np.concatenate([self.rebound_at, np.zeros(extra, dtype=np.int64)])
        self.rebound_at[paths] = self.rebinds
        return [r for r in self.live if self.changed_since(r.profile, self.rebinds - 1)]

    def changed_since(self, profile: Profile, rebinds: int) -> bool:
        """Whether a rebinding after the first ``rebinds`` changed one of the profile's
        paths."""
        return bool(self.rebound_at[profile.frame.paths].max() > rebinds)

    def admits(self, profile: Profile, now: float) -> bool:
        """Whether the coflow can start as a replay now: on every link it shares with live
        replays or with the network's flows, their loads and its peak leave MARGIN."""
        kernel, state = self.kernel, self.state
        links = profile.links
        shared = kernel.shared(links, self.replays_on, state.deg)
        if not shared.size:
            return True
        short = self.unfit(shared, profile)
        if not short.size:
            return True
        self.refresh(short, now)  # stale holds first, then the exact check
        return not self.unfit(shared, profile).size

    def unfit(self, positions: np.ndarray, profile: Profile) -> np.ndarray:
        """Of the profile's links at ``positions``, those whose reservation, load and the
        profile's peak leave less than MARGIN of their capacity."""
        state = self.state
        return np.asarray(self.kernel.unfit(positions, profile.links, profile.peaks,
                                            state.reserved, state.cap, state.rate,
                                            state.lflow, state.deg))

    def begin(self, profile: Profile, now: float, done: simpy.Event,
              bytes_sent: np.ndarray) -> Replay | None:
        """Start the coflow as a replay of ``profile`` at ``now`` if :meth:`admits` allows
        it, adding the bytes each GPU sends to ``bytes_sent``; None if it refuses. The check
        as things stand, the reservations and the bytes are one kernel pass
        (``replay_kernel.start_if_fit``); only a coflow that does not fit so goes through
        :meth:`admits`, which lets stale holds go first."""
        state, (gpus, sent) = self.state, profile.sent
        held = self.kernel.start_if_fit(profile.links, profile.peaks, state.reserved, state.cap,
                                        state.rate, state.lflow, state.deg, self.replays_on,
                                        gpus, sent, bytes_sent)
        if not held.size:
            if not self.admits(profile, now):
                return None
            held = self.kernel.start(profile.links, profile.peaks, state.reserved,
                                     self.replays_on, gpus, sent, bytes_sent)
        replay = Replay(now, profile, done, held)
        self.live[replay] = None
        self.replayed += 1
        return replay

    def release(self, replay: Replay, which: np.ndarray) -> None:
        """``replay`` lets go of its links where the mask ``which`` is set (held ones
        only): their reservation ends; a link no replay holds has none, exactly."""
        self.kernel.release(replay.profile.links, replay.profile.peaks, which, replay.held,
                            self.state.reserved, self.replays_on)

    def refresh(self, links: np.ndarray, now: float) -> None:
        """Live replays holding any of ``links`` let go of every link their coflow has left
        by ``now`` (done lazily, only where a check would fail: a reservation held too long
        is conservative, never wrong)."""
        for replay in self.on(links):
            gone = replay.held & (replay.start + replay.profile.leaves <= now)
            if gone.any():
                self.release(replay, gone)

    def short(self, links: np.ndarray, now: float) -> np.ndarray:
        """Of ``links`` (found short of headroom for their replays), those still short once
        the replays there let go of the links they have left by ``now``."""
        self.refresh(links, now)
        state = self.state
        room = state.cap[links] * (1.0 - MARGIN) - state.reserved[links]
        result: np.ndarray = links[(state.reserved[links] > 0.0) & (state.loads(links) > room)]
        return result

    def end(self, replay: Replay, bytes_received: np.ndarray | None = None) -> None:
        """A replay completed (adding the bytes each GPU received to ``bytes_received``) or
        was handed over (none given: its flows report what they deliver): its reservation
        ends."""
        replay.live = False
        if bytes_received is None:
            self.release(replay, replay.held)
        else:
            gpus, received = replay.profile.received
            self.kernel.finish(replay.profile.links, replay.profile.peaks, replay.held,
                               self.state.reserved, self.replays_on, gpus, received,
                               bytes_received)
        del self.live[replay]

    def on(self, links: np.ndarray) -> list[Replay]:
        """Live replays holding any of ``links``."""
        mark = np.zeros(self.replays_on.size, dtype=bool)
        mark[links] = True
        return [r for r in self.live if mark[r.profile.links[r.held]].any()]

    def hand_over(self, replay: Replay, now: float) -> Handover | None:
        """Take ``replay`` off replaying at ``now`` (None if it ends at this instant: it stays
        a replay and its timer reports it)."""
        since = now - replay.start
        frame = replay.profile.frame
        solo, _, completed = run_alone(self.state, frame, since)
        self.solo_solves += solo.recomputations
        if completed:
            return None
        self.end(replay)
        self.handed += 1
        slots = np.sort(solo.active[: solo.active_flows])
        flows = (frame.paths[solo.fpath[slots]], solo.size[slots], solo.dst[slots],
                 solo.grp[slots])
        pending = [(delay - since, batch) for delay, batch in replay.profile.batches
                   if not delay < since]
        return Handover(flows, solo.rem[slots].copy(), pending, solo.received, solo.flows_done)

