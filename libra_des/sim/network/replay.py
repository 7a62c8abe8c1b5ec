"""All-to-alls that nothing interacts with are run alone once and replayed.

A training step repeats the same all-to-all(v) many times: every layer of a microbatch
exchanges the same byte matrix over the same GPUs (at 128 GPUs on the quickstart layout,
6,144 all-to-alls with 128 distinct matrices). What such a coflow does in the flow network
depends only on its matrix, its routes and the link capacities, *as long as nothing else
competes with it*. This module runs each distinct coflow once in a private
:class:`~libra_des.sim.network.fluid.FluidState` (a *solo run*), records when it completes
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
loads change nowhere else). If it fails, the replays on the links short of headroom are
*handed over* at that instant: their solo runs are repeated up to it, and their unfinished
flows, with the bytes they still have to send, join the shared network (flows still waiting
for their route latency join when it has passed), which solves again. From then on they are
solved like any other coflow. Results agree with never replaying up to float round-off (solo
runs count time from the coflow's start), which the tests check.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import simpy

from libra_des.sim.network.fluid import MARGIN, FluidState

#: Flows to start together: path numbers, bytes, receiving GPUs, coflows.
Flows = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]

#: Batches of one coflow's flows by route latency: (seconds after the call, flows).
Batches = list[tuple[float, Flows]]



@dataclass(frozen=True)
class Profile:
    """What a coflow does alone: its makespan (seconds from the call), the binding links it
    crosses and the highest load (bytes/s) it puts on each; its flows by latency (coflow
    number -1), and the bytes each GPU sends and receives (GPU ids, totals)."""

    makespan: float
    links: np.ndarray
    peaks: np.ndarray
    batches: Batches
    sent: tuple[np.ndarray, np.ndarray]
    received: tuple[np.ndarray, np.ndarray]

    @property
    def flows(self) -> int:
        return sum(flows[0].size for _, flows in self.batches)


@dataclass(eq=False)
class Replay:
    """A coflow running as a replay of its solo run, started at ``start``. Compared by
    identity: two replays started at one instant from alike profiles are still two (field
    by field, ``list.remove`` would compare the profiles' arrays)."""

    start: float
    profile: Profile
    done: simpy.Event
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
    template: FluidState, batches: Batches, until: float
) -> tuple[FluidState, float, bool]:
    """The coflow's ``batches`` run alone from time 0 until it completes or until ``until``
    (batches arriving at or after ``until`` are not started): the solo state, the time of
    its last update and whether the coflow completed."""
    solo = template.solo()
    group = solo.group(sum(flows[0].size for _, flows in batches))
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


def profile_of(
    template: FluidState, batches: Batches, sent: tuple[np.ndarray, np.ndarray]
) -> tuple[Profile, int]:
    """Run the coflow alone to its end (``sent``: the bytes each GPU sends, see
    :func:`per_gpu`): what a replay needs, and the solves it took."""
    solo, makespan, completed = run_alone(template, batches, np.inf)
    assert completed, "a coflow alone always completes"
    paths, sizes, dsts = (np.concatenate([flows[k] for _, flows in batches]) for k in range(3))
    links = np.unique(template.plinks[paths])
    links = links[links >= 0]
    profile = Profile(makespan, links, solo.peak[links].copy(), batches, sent,
                      per_gpu(dsts, sizes))
    return profile, solo.recomputations


def per_gpu(gpus: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct GPUs and the bytes each moves (``sizes`` summed by ``gpus``)."""
    ids, where = np.unique(gpus, return_inverse=True)
    return ids, np.bincount(where, weights=sizes, minlength=ids.size)


class ReplayBook:
    """Profiles by coflow, the live replays, and their reservations on the shared network's
    links (``state.reserved``: the sum of the live replays' peaks on each link)."""

    def __init__(self, state: FluidState) -> None:
        self.state = state
        state.watch_reserved()
        # Profiles by GPUs and matrix sum; the matrix itself tells apart those that collide.
        self.profiles: dict[tuple[tuple[int, ...], float], list[tuple[np.ndarray, Profile]]] = {}
        self.live: list[Replay] = []
        # Live replays per link: a link with none has no reservation, exactly (not a float
        # leftover of adding and subtracting peaks).
        self.replays_on = np.zeros(0, dtype=np.int64)
        self.replayed = self.handed = self.solo_runs = self.solo_solves = 0

    def find(self, ranks: tuple[int, ...], matrix: np.ndarray) -> Profile | None:
        """The profile of this all-to-all, if one was made."""
        for seen, profile in self.profiles.get((ranks, float(matrix.sum())), ()):
            if np.array_equal(seen, matrix):
                return profile
        return None

    def make(
        self, ranks: tuple[int, ...], matrix: np.ndarray, batches: Batches,
        sent: tuple[np.ndarray, np.ndarray],
    ) -> Profile:
        """Run the all-to-all alone and keep its profile."""
        profile, solves = profile_of(self.state, batches, sent)
        self.solo_runs += 1
        self.solo_solves += solves
        self.profiles.setdefault((ranks, float(matrix.sum())), []).append(
            (np.array(matrix, dtype=float), profile)
        )
        return profile

    def fit(self) -> None:
        """Room for every link the state knows."""
        self.state.watch_reserved()
        extra = self.state.cap.size - self.replays_on.size
        if extra > 0:
            self.replays_on = np.concatenate([self.replays_on, np.zeros(extra, dtype=np.int64)])

    def forget(self) -> None:
        """Drop every profile (the binding links changed, so solo runs may differ)."""
        self.profiles.clear()

    def admits(self, profile: Profile) -> bool:
        """Whether the coflow can start as a replay now: on every link it shares with live
        replays or with the network's flows, their loads and its peak leave MARGIN."""
        state, links = self.state, profile.links
        shared = (self.replays_on[links] > 0) | (state.deg[links] > 0)
        if not shared.any():
            return True
        links, peaks = links[shared], profile.peaks[shared]
        load = state.reserved[links] + state.loads(links) + peaks
        return bool((load <= state.cap[links] * (1.0 - MARGIN)).all())

    def start(self, replay: Replay) -> None:
        links = replay.profile.links
        self.state.reserved[links] += replay.profile.peaks
        self.replays_on[links] += 1
        self.live.append(replay)
        self.replayed += 1

    def end(self, replay: Replay) -> None:
        """A replay completed (or was handed over): its reservation ends."""
        links = replay.profile.links
        replay.live = False
        self.state.reserved[links] -= replay.profile.peaks
        self.replays_on[links] -= 1
        self.state.reserved[links[self.replays_on[links] == 0]] = 0.0
        self.live.remove(replay)

    def on(self, links: np.ndarray) -> list[Replay]:
        """Live replays holding any of ``links``."""
        mark = np.zeros(self.replays_on.size, dtype=bool)
        mark[links] = True
        return [r for r in self.live if mark[r.profile.links].any()]

    def hand_over(self, replay: Replay, now: float) -> Handover | None:
        """Take ``replay`` off replaying at ``now`` (None if it ends at this instant: it stays
        a replay and its timer reports it)."""
        since = now - replay.start
        batches = replay.profile.batches
        solo, _, completed = run_alone(self.state, batches, since)
        self.solo_solves += solo.recomputations
        if completed:
            return None
        self.end(replay)
        self.handed += 1
        slots = np.sort(solo.active[: solo.active_flows])
        flows = (solo.fpath[slots], solo.size[slots], solo.dst[slots], solo.grp[slots])
        pending = [(delay - since, batch) for delay, batch in batches if not delay < since]
        return Handover(flows, solo.rem[slots].copy(), pending, solo.received, solo.flows_done)

