"""``libra-des run SCENARIO``: simulate a scenario and write ``DIR/result.json``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from libra_des.commands.common import dumps, int_list, write_atomic
from libra_des.config import load_scenario
from libra_des.outputs import claim, default_folder, remove_stale
from libra_des.preflight import check_feasible, trace_ranks
from libra_des.simulation import simulate
from libra_des.validation import check_output_dir


def register(subs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subs.add_parser("run", help="simulate a scenario and write result.json")
    p.add_argument("scenario", help="scenario YAML file")
    p.add_argument("--out", default=None, help="output folder (default runs/<scenario name>)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a scenario field, e.g. parallelism.dp=16 (repeatable)")
    p.add_argument("--trace", action="store_true", help="also write DIR/trace.json (Perfetto)")
    p.add_argument("--trace-ranks", default=None, help="rank groups to trace, e.g. 0,1,2")
    p.add_argument("--json", action="store_true", help="print result.json to stdout")
    p.add_argument("--table", action="store_true",
                   help="also write DIR/result.csv (and result.parquet with the tables extra)")
    p.add_argument("--no-preflight", action="store_true",
                   help="run even when the memory/time estimate exceeds this machine")
    p.set_defaults(handler=handle)


def summary_table(result: dict[str, Any], title: str) -> Table:
    """Readable summary of the headline metrics."""
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in summary_rows(result):
        table.add_row(key, value)
    return table


def summary_rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    if r.get("kind") != "training":
        keys = ("moe_layer_s", "prefill_tokens_per_s", "replica_waste_fraction", "events")
        rows = [(k, f"{r[k]:.6g}") for k in keys if isinstance(r.get(k), int | float)]
        if isinstance(r.get("imbalance_ratio"), dict):
            rows.append(("imbalance_ratio.mean", f"{r['imbalance_ratio']['mean']:.4f}"))
        return rows
    return [
        ("policy", str(r["policy"])),
        ("GPUs", str(r["gpus"])),
        ("step time (s, mean)", f"{r['step_time_s']['mean']:.4f}"),
        ("tokens/s", f"{r['tokens_per_s']:.4g}"),
        ("MFU", f"{r['mfu']:.3f}"),
        ("bubble fraction", f"{r['bubble_fraction']:.4f}"),
        ("DP straggler fraction", f"{r['dp_straggler_fraction']:.4f}"),
        ("pool wait fraction", f"{r['pool_wait_fraction']:.4f}"),
        ("comm exposed / hidden", f"{r['comm_exposed_fraction']:.4f} / "
                                  f"{r['comm_hidden_fraction']:.4f}"),
        ("attention imbalance inter / intra", f"{r['attention_imbalance']['inter_pool']:.4f} / "
                                              f"{r['attention_imbalance']['intra_pool']:.4f}"),
        ("attention straggler (s, mean / max)", f"{r['attention_straggler_s']['mean']:.4g} / "
                                                f"{r['attention_straggler_s']['max']:.4g}"),
        ("peak memory (GiB per stage)", memory_text(r)),
        ("TAP (H, B)", tap_text(r)),
        ("events", str(r["events"])),
        ("wall (s)", f"{r['wall_s']:.2f}"),
    ]


def memory_text(r: dict[str, Any]) -> str:
    peaks = r.get("peak_memory_gib") or []
    text = " / ".join(f"{x:.1f}" for x in peaks)
    return f"{text} (OOM)" if r.get("oom") else text


def tap_text(r: dict[str, Any]) -> str:
    tuned = r.get("tap_autotune")
    if tuned:
        return f"{tuned['heads_split']}, {tuned['block_size']} (auto)"
    if r.get("policy") not in ("libra", "distca"):
        return "unused (no TAP)"
    bal = r.get("scenario", {}).get("balancer", {})
    return f"{bal.get('heads_split')}, {bal.get('block_size')}"


def handle(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario, args.set)
    parsed = None if args.trace_ranks is None else int_list("--trace-ranks", args.trace_ranks, 0)
    ranks = trace_ranks(scenario, args.trace, args.trace_ranks, parsed)
    if not args.no_preflight:
        check_feasible(scenario)
    out = Path(args.out) if args.out else default_folder(args.scenario)
    tables = ("result.csv", "result.parquet") if args.table else ()
    check_output_dir(out, "--out", ("result.json", "trace.json", *tables))
    if not args.out and out.name != Path(args.scenario).stem:
        sys.stderr.write(f"note: runs/{Path(args.scenario).stem} holds another scenario's "
                         f"results; writing to {out}\n")
    result, trace = simulate(scenario, progress=not args.json, trace_ranks=ranks,
                             want_trace=args.trace)
    write_atomic(out / "result.json", dumps(result) + "\n")
    if not args.out:
        claim(out, args.scenario)
    if trace is not None:
        write_atomic(out / "trace.json", json.dumps(trace))
    if args.table:
        from libra_des.tables import write_run_table

        write_run_table(result, out)
    remove_stale(out, {"trace.json"} if trace is not None else set())
    if args.json:
        print(dumps(result))
    else:
        Console().print(summary_table(result, f"{Path(args.scenario).name} -> {out}/result.json"))
    return 0
