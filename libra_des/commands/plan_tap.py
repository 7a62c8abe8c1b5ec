"""``libra-des plan --scenario S --tap``: the (H, B) ranking that ``auto`` TAP knobs use.

The API's :func:`~libra_des.api.planning.rank_tap` replays exactly what a run does before its
first step (same window, same pools, same cost model and memory check); this command prints
every candidate, best first. Fixed ``heads_split``/``block_size`` in the scenario are ignored
here: the ranking covers the whole grid.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from rich.table import Table

from libra_des.api.numbers import with_unit
from libra_des.api.planning import rank_tap
from libra_des.commands.common import dumps
from libra_des.commands.tables import print_table
from libra_des.errors import InputError

if TYPE_CHECKING:
    from libra_des.api.planning import Ranking

#: ``plan`` flags that ``--tap`` does not use (it takes everything from the scenario).
IGNORED = ("gbs", "pool_size", "placement", "heads_split", "block_size", "policy", "windows",
           "seed", "cp", "model", "workload")


def table(name: str, ranking: Ranking) -> Table:
    t = Table(title=f"{name}: TAP (H, B) by predicted attention time per layer (fwd + bwd)",
              caption="predicted: slowest worker's Pipeliner makespan, mean over the heaviest, "
              "median and lightest pool of the first window; exposed = predicted - compute")
    for i, col in enumerate(("H", "B", "predicted", "compute", "exposed", "intra",
                             "bytes/layer", "remote", "fits")):
        t.add_column(col, justify="right" if i else "left")
    for c in ranking.candidates:
        t.add_row(str(c.heads_split), str(c.block_size), *(with_unit(x, "s") for x in (
                  c.predicted_s, c.compute_s, c.exposed_s)), with_unit(c.imbalance),
                  with_unit(c.exchange_bytes, "B"), with_unit(c.remote_bytes, "B"),
                  "yes" if c.fits else "no")
    return t


def handle_tap(args: argparse.Namespace) -> int:
    if not args.scenario:
        raise InputError("--tap", True, "with --scenario (a training scenario)")
    for flag in IGNORED:  # the ranking replays the scenario: these flags would be ignored
        value = getattr(args, flag)
        if value is not None and not (flag == "windows" and value == "20"):
            raise InputError(f"--{flag.replace('_', '-')}", value,
                             "not with --tap (set the scenario field with --set)")
    ranked = rank_tap(args.scenario, list(args.set))
    if args.json:
        print(dumps(ranked.ranking.as_dict()))
    else:
        print_table(table(ranked.scenario, ranked.ranking), ("remote", "compute"), pipe_width=120)
    return 0
