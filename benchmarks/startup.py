"""Start-up speed of a short command: ``libra-des plan ... --windows 20``, imports included.

Each repeat runs the whole command in a fresh interpreter (as a user types it), alternating
this checkout, an optional baseline checkout (``--base``) and a bare ``import numpy`` process
(the floor every run pays), so that machine load hits all alike. Prints the median and the
minimum wall and CPU seconds of each; on a busy machine the minimum is the steadier figure.
With ``--base``, also checks that the two trees print the same JSON (``plan_seconds`` aside,
it is a timing). ``--importtime`` lists the slowest imports of one run of this checkout.

    python benchmarks/startup.py --repeats 9
    git worktree add ../base main --detach; python benchmarks/startup.py --base ../base
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
PLAN = ["plan", "--workload", "workloads/longctx-1m.yaml", "--gbs", "128", "--pool-size", "8",
        "--policy", "vrsp", "--windows", "20", "--json"]


def timed(argv: list[str], tree: Path) -> tuple[float, float, str]:
    """(wall s, CPU s of the child, stdout) of one fresh process run from ``tree``."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    out = subprocess.run(argv, env=env, cwd=tree, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out.stdout


def comparable(stdout: str) -> str:
    """The plan JSON without its timing field."""
    data = json.loads(stdout)
    for row in data["results"]:
        row.pop("plan_seconds", None)
    return json.dumps(data, sort_keys=True)


def slowest_imports(tree: Path, top: int) -> list[str]:
    """The ``top`` imports with the largest cumulative time (``python -X importtime``)."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "libra_des.cli", *PLAN],
                         env=env, cwd=tree, check=True, capture_output=True, text=True)
    rows = []
    for line in out.stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (.*)", line)
        if m:
            rows.append((int(m.group(1)), m.group(2)))
    return [f"{us / 1e3:8.1f} ms  {name}" for us, name in sorted(rows, reverse=True)[:top]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, default=None, help="baseline checkout")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--importtime", type=int, default=0, metavar="N",
                        help="also list the N slowest imports of this checkout")
    args = parser.parse_args()
    cases = {"new": ([sys.executable, "-m", "libra_des.cli", *PLAN], HERE),
             "numpy": ([sys.executable, "-c", "import numpy"], HERE)}
    if args.base is not None:
        cases["base"] = ([sys.executable, "-m", "libra_des.cli", *PLAN], args.base.resolve())
    runs: dict[str, list[tuple[float, float, str]]] = {k: [] for k in cases}
    for _ in range(args.repeats):
        for label, (argv, tree) in cases.items():
            runs[label].append(timed(argv, tree))
    print(f"{'case':<8}{'wall med':>10}{'wall min':>10}{'cpu med':>10}{'cpu min':>10}")
    for label, rows in runs.items():
        walls, cpus = [r[0] for r in rows], [r[1] for r in rows]
        print(f"{label:<8}{statistics.median(walls):>10.3f}{min(walls):>10.3f}"
              f"{statistics.median(cpus):>10.3f}{min(cpus):>10.3f}")
    if "base" in runs:
        med = {k: statistics.median(r[0] for r in v) for k, v in runs.items()}
        same = comparable(runs["new"][0][2]) == comparable(runs["base"][0][2])
        print(f"new/base wall (medians): {med['new'] / med['base']:.3f}; "
              f"identical output: {same}")
    for line in slowest_imports(HERE, args.importtime) if args.importtime else []:
        print(line)


if __name__ == "__main__":
    main()
