"""What each modelling mechanism moves: the paper scenarios re-run with one mechanism on at a time.

Rows (``MECHANISMS``) are sets of ``--set`` overrides on top of a base that has every newer
mechanism off: the paper's median/p99 length laws with the older synthetic tail
(``longctx-256k``/``longctx-1m``: Pareto 1.2 capped at L/2) and the calibrated per-op noise
only, with free overlap (``overlap.interference=off``; the model's default is on). Each row
switches one mechanism on; ``all`` switches on every one this build knows. ``corpus law``
switches to the paper scenarios' default laws (``paper-256k``/``paper-1m``: the paper's median
and p99, a public corpus's tail); ``public corpus`` to the public corpora themselves
(``public-wlbllm-256k``/``public-prolong-1m``; not part of ``all``). A row whose knob a build
does not have is reported as such, not run.
``--row NAME=K=V,K=V`` adds a row, ``--set K=V`` adds overrides to every run (both
repeatable).

Per row it measures, on reduced sizes (``--layers``, ``--steps``):

* microbench: ``paper-attention-microbench-{256k,1m}``, core-attention straggler (slowest
  worker per layer call) mean and max per policy, and each baseline's ratio to Libra's;
* scaling: ``paper-dp-scaling-{256k,1m}``, scaling efficiency DP 1 -> 16 of Ulysses and
  Libra, tokens/s at DP 16 over 16 x tokens/s at DP 1;
* microbatch spread: ``paper-pp-microbatch-{256k,1m}``, (max - min) / mean of the
  first-stage forward time per microbatch over all steps, Libra and Ulysses;
* pool sweep: ``paper-pool-sweep-{256k,1m}`` at P = 8, Libra's step time and the exposed share
  of its attention communication.

    .venv/bin/python benchmarks/mechanisms.py [--jobs 2] [--out runs/mechanisms]
        [--set K=V ...] [--row NAME=K=V,K=V ...] [--only base,all]

Writes ``mechanisms.json`` and ``mechanisms.md`` (the table docs/model.md carries) under
``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from libra_des.config import ROOT, load_scenario
from libra_des.errors import InputError

SC = ROOT / "scenarios"
OLD_LAW = {"256k": "workload=longctx-256k", "1m": "workload=longctx-1m"}
BASE = ["variance.fleet=false", "overlap.interference=off", "memory.check=warn"]
#: name -> overrides switching the mechanism on (on top of BASE and the old length law).
MECHANISMS: dict[str, list[str]] = {
    "base": [],
    "corpus law": ["workload=@corpus"],
    "public corpus": ["workload=@public"],
    "GPU speed + node/rack": ["variance.gpu_speed_sigma=0.013",
                              "variance.jitter_node_correlation=0.3",
                              "variance.node_episode_rate=2e-4",
                              "variance.rack_episode_rate=5e-5"],
    "link jitter + degradation": ["variance.link_jitter_sigma=0.02",
                                  "variance.link_jitter_correlation=0.3",
                                  "variance.link_episode_rate=1e-4"],
    "host gaps": ["variance.launch_gap_seconds=1e-5", "variance.host_stall_rate=1e-3"],
    "WLB-LLM outlier delay": ["balancer.wlb_defer_outliers=true"],
    "interference": ["overlap.interference=on"],
    "all": ["@all"],
}
#: The paper scenarios' default corpus laws (the paper's median and p99, a public corpus's tail)
#: and the public corpora themselves (docs/workloads.md).
CORPUS = {"256k": "workload=paper-256k", "1m": "workload=paper-1m"}
PUBLIC = {"256k": "workload=public-wlbllm-256k", "1m": "workload=public-prolong-1m"}
#: Rows that ``all`` leaves out: a second corpus law would override the first.
NOT_IN_ALL = ("base", "all", "public corpus")
POLICIES = ("ulysses", "wlb_llm", "distca", "libra")


def expand(row: list[str], size: str, known: dict[str, list[str]]) -> list[str]:
    """The row's overrides for one corpus size (``@corpus``, ``@all`` resolved)."""
    out: list[str] = []
    for item in row:
        if item == "workload=@corpus":
            out.append(CORPUS[size])
        elif item == "workload=@public":
            out.append(PUBLIC[size])
        elif item == "@all":
            for name, sets in known.items():
                if name not in NOT_IN_ALL:
                    out += expand(sets, size, known)
        else:
            out.append(item)
    return out


def applies(item: str, policy: str) -> bool:
    """WLB-LLM's own knob is bad input under another policy: give it to WLB-LLM only."""
    return not item.startswith("balancer.wlb_") or policy == "wlb_llm"


def run_one(job: tuple[str, list[str]]) -> dict[str, Any]:
    """One simulation; the result fields the table reads."""
    from libra_des.kinds.simulation import simulate

    name, sets = job
    try:
        res, _ = simulate(load_scenario(SC / f"{name}.yaml", sets))
    except InputError as err:  # carried back as text (the error does not pickle)
        raise RuntimeError(f"{name} {' '.join(sets)}: {err}") from None
    mb = [float(x) for x in res.get("microbatch_forward_s") or []]
    return {
        "straggler": res["attention_straggler_s"],
        "tokens_per_s": float(res["tokens_per_s"]),
        "step_s": float(res["step_time_s"]["mean"]),
        "exposed": float(res["comm_exposed_fraction"]),
        "mb": mb,
    }


def jobs_of(row: list[str], common: list[str], size: str, a: argparse.Namespace,
            known: dict[str, list[str]]) -> dict[tuple[str, ...], tuple[str, list[str]]]:
    """Every simulation of one row and corpus size, keyed by (study, policy, variant)."""
    head = [OLD_LAW[size], *BASE, f"model.layers={a.layers}", *common]
    extra = expand(row, size, known)

    def sets(policy: str, steps: int, more: list[str]) -> list[str]:
        return [*head, f"steps={steps}", f"balancer.policy={policy}", *more,
                *(x for x in extra if applies(x, policy))]

    out: dict[tuple[str, ...], tuple[str, list[str]]] = {}
    for p in POLICIES:
        out["micro", p, ""] = (f"paper-attention-microbench-{size}", sets(p, a.steps, []))
    for p in ("ulysses", "libra"):
        for dp in (1, 16):
            out["scale", p, str(dp)] = (f"paper-dp-scaling-{size}", sets(p, a.steps, [
                f"parallelism.dp={dp}", f"balancer.pool_size={min(8, dp)}"]))
        # PP 4 needs a layer per stage at least.
        out["pp", p, ""] = (f"paper-pp-microbatch-{size}", sets(p, a.pp_steps, [
            f"model.layers={max(a.layers, 4)}"]))
    out["pool", "libra", ""] = (f"paper-pool-sweep-{size}", sets("libra", a.steps, []))
    return out


def spread(xs: list[float]) -> float:
    return (max(xs) - min(xs)) / (sum(xs) / len(xs)) if xs else float("nan")


def summarise(res: dict[tuple[str, ...], dict[str, Any]]) -> dict[str, float]:
    """The table's numbers for one row and size."""
    lib = res["micro", "libra", ""]["straggler"]
    out: dict[str, float] = {"libra_mean_ms": 1e3 * lib["mean"], "libra_max_ms": 1e3 * lib["max"]}
    for p in ("ulysses", "wlb_llm", "distca"):
        s = res["micro", p, ""]["straggler"]
        out[f"{p}_mean_x"] = s["mean"] / lib["mean"]
        out[f"{p}_max_x"] = s["max"] / lib["max"]
    for p in ("ulysses", "libra"):
        one, many = res["scale", p, "1"], res["scale", p, "16"]
        out[f"{p}_eff"] = many["tokens_per_s"] / (16 * one["tokens_per_s"])
        out[f"{p}_mb_spread"] = spread(res["pp", p, ""]["mb"])
    out["pool_step_s"] = res["pool", "libra", ""]["step_s"]
    out["pool_exposed"] = res["pool", "libra", ""]["exposed"]
    return out


def valid(row: list[str], common: list[str], known: dict[str, list[str]]) -> str | None:
    """None when this build accepts the row's knobs, else the one-line reason."""
    try:
        sets = [x for x in expand(row, "256k", known) if applies(x, "libra")]
        load_scenario(SC / "paper-pool-sweep-256k.yaml", [*BASE, *common, *sets])
    except InputError as err:
        return str(err)
    return None


COLUMNS = [
    ("size", "corpus"), ("libra_mean_ms", "Libra straggler mean ms"),
    ("libra_max_ms", "Libra max ms"),
    ("ulysses_mean_x", "Ulysses/Libra mean"), ("ulysses_max_x", "max"),
    ("wlb_llm_mean_x", "WLB-LLM/Libra mean"), ("wlb_llm_max_x", "max"),
    ("distca_mean_x", "DistCA/Libra mean"), ("distca_max_x", "max"),
    ("ulysses_mb_spread", "mb spread Ulysses"), ("libra_mb_spread", "mb spread Libra"),
    ("ulysses_eff", "DP16 eff. Ulysses"), ("libra_eff", "DP16 eff. Libra"),
    ("pool_step_s", "pool P=8 step s"), ("pool_exposed", "exposed comm"),
]


def table(rows: dict[str, Any]) -> str:
    lines = ["| mechanism | " + " | ".join(h for _, h in COLUMNS) + " |",
             "| --- " * (len(COLUMNS) + 1) + "|"]
    for name, row in rows.items():
        if "skipped" in row:
            lines.append(f"| {name} | not in this build: {row['skipped']} |")
            continue
        for size, vals in row["sizes"].items():
            cells = [size] + [f"{vals[k]:.3f}" for k, _ in COLUMNS[1:]]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--set", action="append", default=[], dest="common")
    p.add_argument("--row", action="append", default=[])
    p.add_argument("--only", default="")
    p.add_argument("--sizes", default="256k,1m")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--pp-steps", type=int, default=3)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--out", type=Path, default=Path("runs/mechanisms"))
    a = p.parse_args(argv)
    known = dict(MECHANISMS)
    for spec in a.row:
        name, _, sets = spec.partition("=")
        if not name or not sets:
            p.exit(2, f"error: --row: got {spec!r}; allowed: NAME=K=V,K=V\n")
        known[name] = sets.split(",")
        # The lead's rows join `all` too (they are mechanisms to switch on with the rest).
    names = [n for n in known if not a.only or n in a.only.split(",")]
    sizes = [s for s in a.sizes.split(",") if s]
    if any(s not in OLD_LAW for s in sizes):
        p.exit(2, f"error: --sizes: got {a.sizes!r}; allowed: 256k, 1m\n")
    runnable = {n: s for n, s in known.items() if valid(s, a.common, known) is None
                or n == "all"}
    out: dict[str, Any] = {}
    with ProcessPoolExecutor(max_workers=a.jobs) as pool:
        for name in names:
            reason = valid(known[name], a.common, runnable)
            if reason is not None:
                short = reason.removeprefix("error: ").split("; keys here")[0]
                out[name] = {"skipped": short.replace("|", "/")}
                print(f"{name}: skipped ({reason})", flush=True)
                continue
            row = known[name] if name != "all" else ["@all"]
            out[name] = {"sets": row, "sizes": {}}
            for size in sizes:
                jobs = jobs_of(row, a.common, size, a, runnable)
                done = dict(zip(jobs, pool.map(run_one, jobs.values()), strict=True))
                out[name]["sizes"][size] = summarise(done)
                print(f"{name} {size}: " + json.dumps(out[name]["sizes"][size]), flush=True)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "mechanisms.json").write_text(json.dumps(out, indent=1) + "\n")
    (a.out / "mechanisms.md").write_text(table(out))
    print(table(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
