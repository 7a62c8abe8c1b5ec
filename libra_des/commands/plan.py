"""``libra-des plan``: the configuration simulator's flags, table and JSON.

The replay itself (what each row means, the defaults) is :mod:`libra_des.runs.plan_replay`; the
Python API runs the same through :func:`libra_des.api.replay_plans`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from libra_des.api.numbers import with_unit
from libra_des.api.planning import (
    default_plan_model,
    max_seed,
    plan_policies,
    plan_settings,
    replay_windows,
)
from libra_des.commands.common import dumps, int_list, parse_list
from libra_des.errors import InputError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from libra_des.api.planning import PlanSettings


#: The placement study's pool sizes and policies: the Libra training paper's placement studies
#: sweep P over these (docs/model.md A) and compare VRSP with random grouping.
PLACEMENT_POOL_SIZES = (2, 4, 8, 16, 32, 64)
PLACEMENT_POLICIES = ("random", "vrsp")


def register(subs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subs.add_parser(
        "plan",
        help="replay the planners: imbalance and bytes per (P, H, B)",
        description="Replay grouping and TAP planners over GBS windows of a corpus and report "
        "inter-pool imbalance (with the analytic LLN estimate), intra-pool imbalance, "
        "exchange bytes per layer and planning time for every (policy, P, H, B).",
    )
    src = p.add_argument_group("input (default: workloads/longctx-1m.yaml)")
    src.add_argument("--workload", default=None, help="workload YAML (name or path)")
    src.add_argument("--scenario", default=None,
                     help="scenario YAML: takes workload, model, gbs, cp, balancer, seed")
    src.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="override a field of the scenario (or of the --workload file)")
    p.add_argument("--gbs", type=str, default=None, help="packed sequences per window (128)")
    p.add_argument("--pool-size", default=None, help="P, comma-separated list (8)")
    p.add_argument("--placement", action="store_true", default=None,
                   help="the paper's placement study: policies random,vrsp at P = "
                   f"{','.join(map(str, PLACEMENT_POOL_SIZES))} (instead of --pool-size, "
                   "--policy)")
    p.add_argument("--heads-split", default=None, help="H, comma-separated list (1)")
    p.add_argument("--block-size", default=None, help="B tokens, comma-separated list (16384)")
    p.add_argument("--policy", default=None,
                   help=f"comma-separated from {', '.join(plan_policies())} (vrsp)")
    p.add_argument("--windows", type=str, default="20", help="GBS windows to replay (20)")
    p.add_argument("--seed", type=str, default=None, help="seed of the corpus stream (0)")
    p.add_argument("--cp", type=str, default=None,
                   help="CP workers per sequence (packed length / 128K)")
    p.add_argument("--model", default=None, help=f"model name or YAML ({default_plan_model()})")
    p.add_argument("--tap", action="store_true",
                   help="with --scenario: rank TAP (H, B) candidates by predicted attention time "
                   "on the run's first window, as heads_split/block_size: auto do for a run")
    p.add_argument("--json", action="store_true", help="print one JSON object to stdout")
    p.set_defaults(handler=handle)


# ----------------------------------------------------------------------------- settings


def one_int(
    flag: str, text: str | None, default: int, minimum: int = 1, maximum: int | None = None
) -> int:
    """A single integer flag (``None`` -> ``default``)."""
    if text is None:
        return default
    values = int_list(flag, text, minimum)
    if len(values) != 1:
        raise InputError(flag, text, "a single integer")
    if maximum is not None and values[0] > maximum:
        raise InputError(flag, text, f"an integer <= {maximum:,}")
    return values[0]


def policy_list(text: str) -> tuple[str, ...]:
    names = parse_list("--policy", text, str)
    for name in names or [""]:
        if name not in plan_policies():
            raise InputError("--policy", name, " | ".join(plan_policies()))
    return tuple(dict.fromkeys(names))


def settings_from_args(args: argparse.Namespace) -> PlanSettings:
    """Parse the flags; :func:`libra_des.runs.plan_replay.settings` resolves and validates them."""
    def ints(flag: str, text: str | None) -> tuple[int, ...] | None:
        return tuple(int_list(flag, text)) if text else None

    pools = ints("--pool-size", args.pool_size)
    policies = None if args.policy is None else policy_list(args.policy)
    if args.placement:
        if pools is not None or policies is not None:
            given = "--pool-size" if pools is not None else "--policy"
            raise InputError("--placement", f"with {given}", "--placement alone (it sets P "
                             "and the policies) or --pool-size/--policy without it")
        pools, policies = PLACEMENT_POOL_SIZES, PLACEMENT_POLICIES

    return plan_settings(
        workload=args.workload, scenario=args.scenario, overrides=args.set, model=args.model,
        gbs=None if args.gbs is None else one_int("--gbs", args.gbs, 0),
        cp=None if args.cp is None else one_int("--cp", args.cp, 0),
        pool_sizes=pools,
        heads_splits=ints("--heads-split", args.heads_split),
        block_sizes=ints("--block-size", args.block_size),
        policies=policies,
        windows=one_int("--windows", args.windows, 20),
        seed=None if args.seed is None else one_int("--seed", args.seed, 0, minimum=0,
                                                     maximum=max_seed()),
    )


# ----------------------------------------------------------------------------- output


#: Columns an 80-column terminal drops first: the planner's time, then the worst window.
SPARE = ("plan", "max")


def table(s: PlanSettings, rows: Sequence[dict[str, Any]]) -> Table:
    from rich.table import Table  # lazy: --json prints no table

    t = Table(
        title=f"{s.workload.name}: GBS {s.gbs}, cp {s.cp}, {s.model.name}, "
        f"{s.windows} windows, seed {s.seed}",
        caption="inter: R-1 across pools (mean, max over windows); LLN: analytic E[R]-1; "
        "intra: R-1 across the heaviest pool's workers after TAP; bytes: forward exchange "
        "bytes per layer; plan: the planner's wall time",
    )
    heads = ("policy", "P", "H", "B", "inter", "max", "LLN", "intra", "bytes", "plan")
    for i, name in enumerate(heads):
        t.add_column(name, justify="left" if i == 0 else "right", no_wrap=i == 0)
    for r in rows:
        t.add_row(
            r["policy"], str(r["pool_size"]), str(r["heads_split"]), str(r["block_size"]),
            *(with_unit(r[k]) for k in ("inter_pool_imbalance", "inter_pool_imbalance_max",
                                        "lln_estimate", "intra_pool_imbalance")),
            with_unit(r["exchange_bytes_per_layer"], "B"), with_unit(r["plan_seconds"], "s"),
        )
    return t


def handle(args: argparse.Namespace) -> int:
    if args.tap:
        from libra_des.commands.plan_tap import handle_tap

        return handle_tap(args)
    s = settings_from_args(args)
    if args.json:  # no progress bar nor table: rich is not imported (start-up time)
        print(dumps({"windows": s.windows, "results": rows_with_progress(s, None)}))
        return 0
    from rich.console import Console

    from libra_des.commands.tables import print_table

    rows = rows_with_progress(s, Console(stderr=True))
    print_table(table(s, rows), SPARE, pipe_width=120)
    return 0


def rows_with_progress(s: PlanSettings, err: Console | None) -> list[dict[str, Any]]:
    """The replay's rows, with a progress bar on ``err`` when it is a terminal."""
    if err is None or not err.is_terminal:
        return replay_windows(s)  # no progress bar to draw (nor its import to pay)
    from rich.progress import Progress

    total = len(s.pool_sizes) * len(s.policies) * len(s.heads_splits) * len(s.block_sizes)
    with Progress(console=err, transient=True) as bar:
        task = bar.add_task("replaying windows", total=total)
        return replay_windows(s, lambda: bar.advance(task))
