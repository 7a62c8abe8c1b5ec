"""A scenario run, new code against a baseline checkout, timed in the same run (not a test).

Each (tree, scenario, repeat) runs ``commands.run.simulate`` in a fresh interpreter (module
imports are excluded from the wall and CPU figures: the run is timed in-process; lazy imports
during the run count, and so does the CPU of helper processes the run starts and joins),
alternating trees so that machine load hits both alike. The third-party libraries named by
``--preload`` (default networkx, simpy: every tree imports them, some at command import,
others lazily inside the run) are imported before the timer in both, so that where a tree
imports them does not decide the ratio; ``--preload ''`` times them too.
``proc s`` is the whole process seen from outside (every import included). Prints medians,
the peak RSS of the process, and new/base ratios (of the medians, and the median and range of
each repeat's own new/base CPU ratio, its two runs back to back). Works for training and MoE
scenarios alike. The baseline is any checkout of the package, e.g. a worktree of ``main``:

    git worktree add ../base main --detach
    python benchmarks/scale_vs_base.py --base ../base [--scenarios scale-16384] [--repeats 3]
    python benchmarks/scale_vs_base.py --base ../base --scenarios scale-16384 \\
        --set parallelism.dp=2048 --repeats 1      # 131,072 GPUs
    python benchmarks/scale_vs_base.py --base ../base --new-set variance.fleet=true

Results must be identical: the script also compares result.json-style metrics of the two
(``--ignore KEYS`` leaves top-level keys out, and a difference names the keys that moved).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

CHILD = """
import json, resource, sys, time
from pathlib import Path
import libra_des
# Three layouts of checkouts (asked by file: an editable install of another tree would
# otherwise supply the module from there): simulation in kinds/, at the top, or in a command.
here = Path(libra_des.__file__).parent
if (here / "kinds" / "simulation.py").exists():
    from libra_des.kinds.simulation import simulate
elif (here / "simulation.py").exists():
    from libra_des.simulation import simulate
else:
    from libra_des.commands.run import simulate
from libra_des.config import ROOT, load_scenario
# A tree whose library leaves process tuning to its caller is tuned as its CLI tunes itself
# (older trees tuned inside simulate), so both run as `libra-des run` would.
if (here / "base" / "startup.py").read_text().count("def tune_process"):
    from libra_des.base.startup import tune_process
    tune_process()
name, sets = sys.argv[1], json.loads(sys.argv[2])
for module in filter(None, sys.argv[3].split(",")):
    __import__(module)
scenario = load_scenario(ROOT / "scenarios" / f"{name}.yaml", sets)

def helpers():  # CPU of finished helper processes (MoE's trace prefetch) counts too
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime

w0, c0, h0 = time.perf_counter(), time.process_time(), helpers()
result, _ = simulate(scenario)
wall, cpu = time.perf_counter() - w0, time.process_time() - c0 + helpers() - h0
result.pop("wall_s", None)  # older bases kept the wall clock in the result
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"wall": wall, "cpu": cpu, "peak_mib": peak, "gpus": result.get("gpus", 0),
                  "result": json.dumps(result, sort_keys=True, default=str)}))
"""


def run_once(tree: Path, name: str, sets: list[str], preload: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    began = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD, name, json.dumps(sets), preload],
                         env=env, cwd=tree, check=True, capture_output=True, text=True)
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row["proc"] = time.perf_counter() - began
    row["result"] = row["result"].replace(str(tree), "<tree>")  # scenario file paths differ
    return row


def compared(result: str, left_out: list[str]) -> dict:
    """A run's result as compared: its top-level keys less ``left_out``."""
    data = json.loads(result)
    return {k: v for k, v in data.items() if k not in left_out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, type=Path, help="baseline checkout")
    parser.add_argument("--scenarios", default="scale-16384")
    parser.add_argument("--set", action="append", default=[], help="KEY=VALUE override")
    parser.add_argument("--new-set", action="append", default=[],
                        help="KEY=VALUE for this checkout only (knobs the base lacks, "
                             "e.g. variance.fleet=true: every mechanism on)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--preload", default="networkx,simpy",
                        help="modules imported before the timer in both trees")
    parser.add_argument("--ignore", default="",
                        help="top-level result keys left out of the comparison (comma-"
                             "separated; e.g. events, where the trees count them differently)")
    args = parser.parse_args()
    fields = ("wall", "cpu", "peak_mib", "proc")
    print(f"{'scenario':<14}{'GPUs':>8}{'tree':>6}{'wall s':>9}{'cpu s':>9}{'peak MiB':>10}"
          f"{'proc s':>9}")
    for name in args.scenarios.split(","):
        runs: dict[str, list[dict]] = {"base": [], "new": []}
        for _ in range(args.repeats):
            for label, tree, extra in (("base", args.base.resolve(), []),
                                       ("new", HERE, args.new_set)):
                runs[label].append(run_once(tree, name, args.set + extra, args.preload))
        med = {k: {f: statistics.median(r[f] for r in v) for f in fields}
               for k, v in runs.items()}
        for label in ("base", "new"):
            m = med[label]
            print(f"{name:<14}{runs[label][0]['gpus']:>8}{label:>6}{m['wall']:>9.2f}"
                  f"{m['cpu']:>9.2f}{m['peak_mib']:>10.0f}{m['proc']:>9.2f}")
        ratio = {f: med["new"][f] / med["base"][f] for f in fields}
        left_out = [k for k in args.ignore.split(",") if k]
        new, base = (compared(runs[k][0]["result"], left_out) for k in ("new", "base"))
        same = new == base
        if not same:
            print("differing keys: " + ", ".join(sorted(
                k for k in new.keys() | base.keys() if new.get(k) != base.get(k))))
        print(f"{name:<14}{'':>8}{'ratio':>6}{ratio['wall']:>9.3f}{ratio['cpu']:>9.3f}"
              f"{ratio['peak_mib']:>10.3f}{ratio['proc']:>9.3f}   identical metrics: {same}")
        # Each repeat's two runs ran back to back: their ratio sees the same machine speed,
        # where the ratio of medians mixes minutes of drift.
        pairs = [n["cpu"] / b["cpu"] for n, b in zip(runs["new"], runs["base"], strict=True)]
        print(f"{name:<14}{'':>8}{'pairs':>6}   CPU new/base per repeat: median "
              f"{statistics.median(pairs):.3f}, range {min(pairs):.3f}-{max(pairs):.3f}")


if __name__ == "__main__":
    main()
