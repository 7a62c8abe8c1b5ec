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
``l``, and let everything else on ``l`` carry at most ``other(l)`` at any time. If
``peak_A(l) + other(l) < cap(l)`` on every shared link, no shared link saturates in the
union of the separate allocations. That union is feasible, and every flow keeps a bottleneck
link on which it is among the fastest (its own, in its own allocation, which no other flow
crosses). So the union is the max-min fair allocation of the whole network, and A runs as it
ran alone. ``other(l)`` sums the peaks of the other live replays on ``l`` and, for each flow
of the shared network on ``l``, the narrowest capacity on its path (a bound on its rate).

The check runs when a replay starts and whenever flows join the shared network. If it fails
for a live replay, the replay is *handed over*: its solo run is repeated up to now, and its
unfinished flows, with the bytes they still have to send, join the shared network (flows
still waiting for their route latency join when it has passed). From then on it is solved
like any other coflow. Results agree with never replaying up to float round-off (solo runs
count time from the coflow's start), which the tests check.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import simpy

from libra_des.sim.network.fluid import FluidState

#: Flows to start together: path numbers, bytes, receiving GPUs, coflows.
Flows = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]

#: Batches of one coflow's flows by route latency: (seconds after the call, flows).
Batches = list[tuple[float, Flows]]

#: Relative headroom the check demands on a shared link (our assumption: far above float
#: round-off in the loads, 1e-15, and far below any load that matters).
MARGIN = 1e-6


@dataclass(frozen=True)
class Profile:
    """What a coflow does alone: its makespan (seconds from the call), the binding links it
    crosses and the highest load (bytes/s) it puts on each."""

    makespan: float
    links: np.ndarray
    peaks: np.ndarray


@dataclass
class Replay:
    """A coflow running as a replay of its solo run, started at ``start``."""

    start: float
    batches: Batches
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


def profile_of(template: FluidState, batches: Batches) -> tuple[Profile, int]:
    """Run the coflow alone to its end: what a replay needs, and the solves it took."""
    solo, makespan, completed = run_alone(template, batches, np.inf)
    assert completed, "a coflow alone always completes"
    paths = np.concatenate([flows[0] for _, flows in batches])
    links = np.unique(template.plinks[paths])
    links = links[links >= 0]
    return Profile(makespan, links, solo.peak[links].copy()), solo.recomputations


@dataclass
class ReplayBook:
    """Profiles by coflow, live replays and the per-link loads the check needs."""

    profiles: dict[bytes, Profile] = field(default_factory=dict)
    live: list[Replay] = field(default_factory=list)
    reserved: np.ndarray = field(default_factory=lambda: np.zeros(0))  # replays' peaks
    bound: np.ndarray = field(default_factory=lambda: np.zeros(0))  # shared flows' bound
    # How many live replays and shared-network flows use each link: whether a link is
    # shared must not hang on float leftovers of adding and subtracting loads.
    replays_on: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    flows_on: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    group_load: dict[int, list[tuple[np.ndarray, np.ndarray]]] = field(default_factory=dict)
    replayed: int = 0
    handed: int = 0
    solo_runs: int = 0
    solo_solves: int = 0

    @staticmethod
    def key(ranks: list[int], matrix: np.ndarray) -> bytes:
        """The coflow's identity: its GPUs and its byte matrix (a 128-bit digest)."""
        digest = hashlib.blake2b(np.asarray(ranks, dtype=np.int64).tobytes(), digest_size=16)
        digest.update(np.ascontiguousarray(matrix, dtype=float).tobytes())
        return digest.digest()

    def fit(self, links: int) -> None:
        """Room for ``links`` links in the per-link arrays."""
        extra = links - self.reserved.size
        if extra > 0:
            self.reserved, self.bound, self.replays_on, self.flows_on = (
                np.concatenate([a, np.zeros(extra, dtype=a.dtype)])
                for a in (self.reserved, self.bound, self.replays_on, self.flows_on)
            )

    def forget(self) -> None:
        """Drop every profile (the binding links changed, so solo runs may differ)."""
        self.profiles.clear()

    def profile(self, key: bytes, state: FluidState, batches: Batches) -> Profile:
        """The coflow's profile, from a solo run the first time it is seen."""
        if key not in self.profiles:
            self.profiles[key], solves = profile_of(state, batches)
            self.solo_runs += 1
            self.solo_solves += solves
        return self.profiles[key]

    def admits(self, profile: Profile, cap: np.ndarray) -> bool:
        """Whether the coflow can start as a replay now (the module docstring's check)."""
        links = profile.links
        shared = (self.replays_on[links] > 0) | (self.flows_on[links] > 0)
        load = self.reserved[links] + self.bound[links] + profile.peaks
        return bool((~shared | (load <= cap[links] * (1.0 - MARGIN))).all())

    def start(self, replay: Replay) -> None:
        self.reserved[replay.profile.links] += replay.profile.peaks
        self.replays_on[replay.profile.links] += 1
        self.live.append(replay)
        self.replayed += 1

    def end(self, replay: Replay) -> None:
        """A replay completed (or was handed over): its reservation ends."""
        replay.live = False
        self.reserved[replay.profile.links] -= replay.profile.peaks
        self.replays_on[replay.profile.links] -= 1
        self.live.remove(replay)

    def join(self, group: int, paths: np.ndarray, plinks: np.ndarray, pcap: np.ndarray) -> None:
        """Flows of shared-network coflow ``group`` on ``paths`` became active."""
        links = plinks[paths]
        rates = np.broadcast_to(pcap[paths][:, None], links.shape)
        keep = links >= 0
        links, rates = links[keep], rates[keep]
        np.add.at(self.bound, links, rates)
        np.add.at(self.flows_on, links, 1)
        self.group_load.setdefault(group, []).append((links, rates))

    def leave(self, group: int) -> None:
        """Shared-network coflow ``group`` completed: its bound ends."""
        for links, rates in self.group_load.pop(group, ()):
            np.subtract.at(self.bound, links, rates)
            np.subtract.at(self.flows_on, links, 1)

    def clashing(self, links: np.ndarray, cap: np.ndarray) -> list[Replay]:
        """Live replays on any of ``links`` whose check no longer holds."""
        on = self.replays_on[links]
        shared = (on > 1) | ((on > 0) & (self.flows_on[links] > 0))
        over = np.zeros(cap.size, dtype=bool)
        load = self.reserved[links] + self.bound[links]
        over[links] = shared & (load > cap[links] * (1.0 - MARGIN))
        if not over.any():
            return []
        return [r for r in self.live if over[r.profile.links].any()]

    def hand_over(self, replay: Replay, now: float, state: FluidState) -> Handover | None:
        """Take ``replay`` off replaying at ``now`` (None if it ends at this instant: it stays
        a replay and its timer reports it)."""
        since = now - replay.start
        solo, _, completed = run_alone(state, replay.batches, since)
        self.solo_solves += solo.recomputations
        if completed:
            return None
        self.end(replay)
        self.handed += 1
        slots = np.sort(solo.active[: solo.active_flows])
        flows = (solo.fpath[slots], solo.size[slots], solo.dst[slots], solo.grp[slots])
        pending = [(delay - since, batch) for delay, batch in replay.batches if not delay < since]
        return Handover(flows, solo.rem[slots].copy(), pending, solo.received, solo.flows_done)

