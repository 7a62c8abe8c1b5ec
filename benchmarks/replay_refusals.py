"""Why all-to-alls are refused as replays in a detailed step (a study, not a test).

Runs one detailed step of ``scenarios/scale-4096.yaml``'s layout at ``--dp`` replicas (64
GPUs each) and, for every all-to-all the replay check refuses
(``sim/network/replay.ReplayBook.begin``), looks at the links it found short of headroom:
whether they carry live replays' reservations, shared-network flows, or both, and whether
the coflow would have fitted with every reservation ignored (what admission by time-windowed
reservations could at most win back). Prints the counts and the shared network's solves.

    python benchmarks/replay_refusals.py [--dp 16]
"""

from __future__ import annotations

import argparse
import collections
import sys
from typing import Any

import numpy as np

from libra_des.config import ROOT, load_scenario
from libra_des.kinds.simulation import simulate
from libra_des.sim.network.flow.fluid import MARGIN
from libra_des.sim.network.flow.replay import Profile, Replay, ReplayBook


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dp", type=int, default=16, help="replicas of 64 GPUs (default 16)")
    args = parser.parse_args()
    if args.dp < 1:
        print(f"--dp: got {args.dp}; allowed: an integer >= 1", file=sys.stderr)
        raise SystemExit(2)
    counts: collections.Counter[str] = collections.Counter()
    books: list[ReplayBook] = []
    begin, init = ReplayBook.begin, ReplayBook.__init__

    def watched_init(self: ReplayBook, *a: Any) -> None:
        init(self, *a)
        books.append(self)

    def watched(self: ReplayBook, profile: Profile, now: float, done: Any,
                bytes_sent: np.ndarray) -> Replay | None:
        replay = begin(self, profile, now, done, bytes_sent)
        if replay is not None:
            counts["admitted"] += 1
            return replay
        state = self.state
        short = self.unfit(self.kernel.shared(profile.links, self.replays_on, state.deg),
                           profile)
        loads = state.loads(short)
        reserved = bool((state.reserved[short] > 0).any())
        flows = bool((loads > 0).any())
        # A profile lists its links in first-use order, not sorted.
        at = {int(link): i for i, link in enumerate(profile.links)}
        peaks = profile.peaks[[at[int(link)] for link in short]]
        counts["refused"] += 1
        counts["short links"] += short.size
        counts["short of replays only"] += reserved and not flows
        counts["short of flows only"] += flows and not reserved
        counts["short of both"] += flows and reserved
        counts["fit with no reservations"] += bool(
            (loads + peaks <= state.cap[short] * (1.0 - MARGIN)).all())
        return None

    ReplayBook.__init__ = watched_init  # type: ignore[method-assign]
    ReplayBook.begin = watched  # type: ignore[method-assign]
    sets = [f"parallelism.dp={args.dp}", f"parallelism.gbs={16 * args.dp}",
            "fidelity=detailed", "steps=1"]
    simulate(load_scenario(ROOT / "scenarios" / "scale-4096.yaml", sets))
    book = books[0]
    print(f"{64 * args.dp} GPUs: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    print(f"hand-overs {book.handed}, shared-network solves {book.state.recomputations}, "
          f"solo-run solves {book.solo_solves}")


if __name__ == "__main__":
    main()
