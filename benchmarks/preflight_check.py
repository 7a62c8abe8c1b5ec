"""The preflight's estimates against measured runs (not a test).

Each case is one run in a fresh interpreter (``libra_des.kinds.simulation.simulate`` after
loading the scenario, as ``libra-des run`` does minus writing files): the whole process's CPU
seconds (user + system, imports and numba's set-up included, and the CPU of the MoE trace
helper it starts: about what a user waits for on an idle machine) and its peak RSS. Run it
with numba's cache warm (a first run compiles the kernels for a minute). Printed per case:
the preflight's estimate, the measurement and their ratio; ``ok`` when the time estimate is
within 3x of the measurement either way and the memory estimate is at or above the measured
peak.

``--measure`` runs the cases (otherwise the measurements stored in the data file are used);
``--write`` stores the new measurements in ``libra_des/kinds/preflight.yaml`` (its
``measured:`` list, with the date and commit); ``--fit`` sets the data file's time and
memory coefficients from the stored measurements (non-negative least squares on relative
error, then the safety margin below), so the factors always sit beside the runs that set
them.

    python benchmarks/preflight_check.py [--measure] [--cases NAME,...] [--write] [--fit]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

from libra_des.config import load_scenario  # noqa: E402
from libra_des.kinds import feasibility, preflight  # noqa: E402


#: A scale-study layout (scale-4096: CP 8 x PP 8, pools of 8) at ``gpus`` GPUs, one step.
def scale(gpus: int, fidelity: str) -> list[str]:
    dp = gpus // 64
    return [f"parallelism.dp={dp}", f"parallelism.gbs={16 * dp}", f"fidelity={fidelity}",
            "steps=1"]


#: name -> (scenario file, overrides): every ``benchmarks/scale_study.py`` case, and shipped
#: scenarios of other shapes (long sequences, MoE prefill) so the coefficients are not fitted
#: to one layout.
CASES: dict[str, tuple[str, list[str]]] = {
    **{f"scale-{g}-{f}": ("scale-4096", scale(g, f))
       for f in ("fast", "detailed") for g in (1024, 4096, 16384)},
    "scale-131072-fast": ("scale-4096", scale(131_072, "fast")),
    "quickstart": ("quickstart", []),
    # The quickstart with 8x the TAP blocks and with short samples: the only cases where
    # blocks and samples move apart from the GPUs, so the fit can price each.
    "quickstart-small-blocks": ("quickstart", ["balancer.block_size=256"]),
    "quickstart-short-samples": ("quickstart", ["workload.lengths.max=32"]),
    "paper-dp-scaling-256k": ("paper-dp-scaling-256k", []),
    "paper-pool-sweep-1m": ("paper-pool-sweep-1m", []),
    "moe-qwen3-235b": ("moe-qwen3-235b", []),
    "moe-glm45": ("moe-glm45", []),
    "moe-ep-2node-h100": ("moe-ep-2node-h100-ib-ndr", []),
    "paper-moe-breakdown": ("paper-moe-breakdown", []),
    "moe-ep-4node-detailed": ("moe-ep-4node-h200-roce-railopt", ["fidelity=detailed"]),
}

CHILD = """
import json, resource, sys
from libra_des.config import ROOT, load_scenario
from libra_des.kinds.simulation import simulate
scenario = load_scenario(ROOT / "scenarios" / (sys.argv[1] + ".yaml"), json.loads(sys.argv[2]))
simulate(scenario)
own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime  # MoE's trace helper too
print(json.dumps({"cpu_s": cpu, "peak_mib": own.ru_maxrss / 1024}))
"""


def measure(name: str) -> dict[str, Any]:
    """One fresh-interpreter run of case ``name``: CPU seconds and peak MiB."""
    scenario, sets = CASES[name]
    env = dict(os.environ, PYTHONPATH=str(HERE))
    out = subprocess.run([sys.executable, "-c", CHILD, scenario, json.dumps(sets)], env=env,
                         cwd=HERE, check=True, capture_output=True, text=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return {"case": name, "scenario": scenario, "set": sets, "cpu_s": round(got["cpu_s"], 2),
            "peak_mib": round(got["peak_mib"])}


def estimate_of(row: dict[str, Any]) -> preflight.Estimate:
    """The preflight's estimate for a stored measurement's scenario and overrides."""
    path = HERE / "scenarios" / f"{row['scenario']}.yaml"
    return feasibility.estimate(load_scenario(path, row["set"]))


def check(rows: list[dict[str, Any]]) -> bool:
    """Print estimate against measurement per case; whether every case is within bounds."""
    print(f"{'case':24} {'est s':>9} {'meas s':>8} {'ratio':>6} {'est MiB':>8} "
          f"{'peak MiB':>8}  verdict")
    every = True
    for row in rows:
        est = estimate_of(row)
        ratio = est.seconds / row["cpu_s"]
        est_mib = est.bytes / 2**20
        ok = 1 / 3 <= ratio <= 3 and est_mib >= row["peak_mib"]
        every &= ok
        print(f"{row['case']:24} {est.seconds:9.1f} {row['cpu_s']:8.2f} {ratio:6.2f} "
              f"{est_mib:8.0f} {row['peak_mib']:8d}  {'ok' if ok else 'OUT'}")
    print("every case within 3x in time and at or above the peak:", "yes" if every else "NO")
    return every


def commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, text=True,
                         capture_output=True, check=False)
    return out.stdout.strip() or "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measure", action="store_true")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--fit", action="store_true")
    args = parser.parse_args()
    names = args.cases.split(",")
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(f"error: --cases: got {unknown[0]!r}; allowed: {', '.join(CASES)}",
              file=sys.stderr)
        return 2
    data = yaml.safe_load(preflight.DATA.read_text())
    stored = {row["case"]: row for row in data.get("measured", [])}
    if args.measure:
        for name in names:
            stored[name] = measure(name) | {"date": str(datetime.date.today()),
                                            "commit": commit()}
            print(f"measured {stored[name]}", flush=True)
    if args.write or args.fit:
        data["measured"] = [stored[n] for n in CASES if n in stored]
        if args.fit:
            from preflight_fit import fit

            fit(data, HERE)
        preflight.DATA.write_text(yaml.safe_dump(data, sort_keys=False, width=100))
        preflight.coefficients.cache_clear()
    return 0 if check([stored[n] for n in names if n in stored]) else 1


if __name__ == "__main__":
    sys.exit(main())
