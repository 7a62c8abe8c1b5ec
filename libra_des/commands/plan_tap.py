"""``libra-des plan --scenario S --tap``: the (H, B) ranking that ``auto`` TAP knobs use.

Replays exactly what a run does before its first step (same window, same pools, same cost
model and memory check; see :mod:`libra_des.sim.training.tap_autotune`) and prints every candidate,
best first. Fixed ``heads_split``/``block_size`` in the scenario are ignored here: the
ranking covers the whole grid.
"""

from __future__ import annotations

import argparse

import numpy as np
from rich.console import Console
from rich.table import Table

from libra_des.api import Ranking, load_scenario, require_training, tap_users, training_balancer
from libra_des.commands.common import dumps
from libra_des.errors import InputError

#: ``plan`` flags that ``--tap`` does not use (it takes everything from the scenario).
IGNORED = ("gbs", "pool_size", "heads_split", "block_size", "policy", "windows", "seed", "cp",
           "model", "workload")


def tap_ranking(path: str, overrides: list[str]) -> tuple[str, Ranking | None]:
    """(scenario name, ranking) for a training scenario with both knobs set to auto."""
    from libra_des.api import choose_tap_knobs, elaborate_cluster, first_window

    sc = require_training(load_scenario(path, [*overrides, "balancer.heads_split=auto",
                                               "balancer.block_size=auto"]),
                          "TAP knobs belong to training runs")
    if not training_balancer(sc.balancer.policy).runs_tap:
        tap = " | ".join(tap_users())
        raise InputError("balancer.policy", sc.balancer.policy, f"{tap} (they run TAP)")
    cluster_rng, data_rng, _ = np.random.default_rng(sc.seed).spawn(3)
    cluster = elaborate_cluster(sc, cluster_rng)
    _, ranking = choose_tap_knobs(sc, cluster, first_window(sc, data_rng))
    return sc.name, ranking


def table(name: str, ranking: Ranking) -> Table:
    t = Table(title=f"{name}: TAP (H, B) by predicted attention time per layer (fwd + bwd)",
              caption="predicted: slowest worker's Pipeliner makespan, mean over the heaviest, "
              "median and lightest pool of the first window; exposed = predicted - compute")
    for i, col in enumerate(("H", "B", "predicted ms", "compute ms", "exposed ms", "intra",
                             "GB/layer", "remote GB", "fits")):
        t.add_column(col, justify="right" if i else "left")
    for c in ranking.candidates:
        t.add_row(str(c.heads_split), str(c.block_size), f"{c.predicted_s * 1e3:.2f}",
                  f"{c.compute_s * 1e3:.2f}", f"{c.exposed_s * 1e3:.2f}", f"{c.imbalance:.4f}",
                  f"{c.exchange_bytes / 1e9:.2f}", f"{c.remote_bytes / 1e9:.2f}",
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
    name, ranking = tap_ranking(args.scenario, list(args.set))
    assert ranking is not None  # both knobs are auto and the policy runs TAP
    if args.json:
        print(dumps(ranking.as_dict()))
    else:
        out = Console()
        (out if out.is_terminal else Console(width=120)).print(table(name, ranking))
    return 0
