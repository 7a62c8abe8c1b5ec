"""Shared pieces of the paper-style figures: options, sweeps, ``plan --json`` runs, style.

Every figure script exposes ``NAME`` and ``make(opts) -> Path`` (the PNG it wrote) and runs
its data through :mod:`libra_des.sweep` into ``OUT/data/<name>[-quick]/`` so that a rerun
resumes; ``python -m paper_figs.<script> --out figs/ [--quick]`` runs one figure.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; no display is needed or wanted
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from libra_des.sweep import Axis, SweepResult, SweepSpec, default_workers, timed_sweep

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios"
DATASETS = ("256k", "1m")

#: The Libra ablation ladder and the baselines, as balancer overrides (PAPERS.md A).
VARIANTS: dict[str, dict[str, Any]] = {
    "Ulysses": {"balancer.policy": "ulysses"},
    "WLB-LLM": {"balancer.policy": "wlb_llm"},
    "DistCA": {"balancer.policy": "distca"},
    "Libra TAP": {"balancer.policy": "libra", "balancer.vrsp": False,
                  "balancer.pipeliner": False},
    "Libra TAP+VRSP": {"balancer.policy": "libra", "balancer.vrsp": True,
                       "balancer.pipeliner": False},
    "Libra Full": {"balancer.policy": "libra", "balancer.vrsp": True,
                   "balancer.pipeliner": True},
}
COLORS = {
    "Ulysses": "#7f7f7f", "WLB-LLM": "#bcbd22", "DistCA": "#9467bd",
    "Libra TAP": "#aec7e8", "Libra TAP+VRSP": "#1f77b4", "Libra Full": "#d62728",
}


@dataclass(frozen=True)
class FigOptions:
    """Where figures go, how much work to do, how many local worker processes."""

    out: Path
    quick: bool = False
    workers: int = 2

    def data(self, name: str) -> Path:
        """Sweep folder of one figure (quick and full runs never share an index)."""
        return self.out / "data" / (f"{name}-quick" if self.quick else name)


def yaml_text(value: Any) -> str:
    """A Python value as the YAML text ``--set`` expects (``False`` -> ``false``)."""
    return json.dumps(value) if isinstance(value, bool) else str(value)


def grid(key: str, values: Sequence[Any]) -> Axis:
    return Axis((key,), tuple((yaml_text(v),) for v in values))


def zipped(columns: Mapping[str, Sequence[Any]]) -> Axis:
    """One axis whose keys move together (all columns the same length)."""
    keys = tuple(columns)
    rows = zip(*(columns[k] for k in keys), strict=True)
    return Axis(keys, tuple(tuple(yaml_text(v) for v in row) for row in rows))


def variant_axis(labels: Sequence[str]) -> Axis:
    """The named variants as one zipped axis; keys a variant leaves out keep defaults."""
    keys = list(dict.fromkeys(k for label in labels for k in VARIANTS[label]))
    defaults = {"balancer.vrsp": True, "balancer.pipeliner": True}
    return zipped({k: [VARIANTS[lb].get(k, defaults.get(k)) for lb in labels] for k in keys})


def sweep(
    opts: FigOptions, folder: str, scenario: str, axes: Sequence[Axis], base: Sequence[str] = ()
) -> SweepResult:
    """Run (or resume) one sweep of a shipped scenario and report its wall time."""
    spec = SweepSpec(str(SCENARIOS / scenario), tuple(base), tuple(axes))
    result, seconds = timed_sweep(spec, opts.data(folder), opts.workers)
    print(f"  {scenario}: {len(result.records)} points ({result.ran} run, {result.reused} "
          f"reused) in {seconds:.1f} s", file=sys.stderr)
    return result


def plan_json(opts: FigOptions, name: str, args: Sequence[str]) -> dict[str, Any]:
    """Run ``libra-des plan ... --json``; keep its output beside the figure's other data."""
    cmd = [sys.executable, "-m", "libra_des.cli", "plan", *args, "--json"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"libra-des plan failed: {done.stderr.strip()}")
    path = opts.data(name) / "plan.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(done.stdout)
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def by_coords(result: SweepResult) -> dict[tuple[int, ...], dict[str, Any]]:
    """Full results keyed by axis coordinates."""
    return {r.point.coords: r.result() for r in result.records}


def dataset_panels(
    opts: FigOptions, name: str, stem: str, axes: Sequence[Axis], base: Sequence[str] = (),
    width: float = 5.6, height: float = 4.4,
) -> tuple[Figure, list[tuple[Any, str, dict[tuple[int, ...], dict[str, Any]]]]]:
    """One panel per corpus: sweep ``<stem>-<dataset>.yaml`` and pair each axes with results."""
    fig, row = new_figure(len(DATASETS), width=width, height=height)
    panels = []
    for ax, data in zip(row, DATASETS, strict=True):
        res = by_coords(sweep(opts, f"{name}/{data}", f"{stem}-{data}.yaml", axes, base))
        panels.append((ax, data, res))
    return fig, panels


def new_figure(ncols: int = 1, width: float = 6.4, height: float = 4.2) -> tuple[Figure, Any]:
    fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, height), squeeze=False,
                             layout="constrained")
    return fig, axes[0]


def save(fig: Figure, opts: FigOptions, name: str) -> Path:
    path = opts.out / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def options(argv: Sequence[str] | None, description: str) -> FigOptions:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--out", default="figs", help="folder for PNGs and their data (figs)")
    p.add_argument("--quick", action="store_true", help="fewer steps/points (< 5 min total)")
    p.add_argument("--workers", type=int, default=default_workers(),
                   help="local worker processes per sweep")
    args = p.parse_args(argv)
    if args.workers < 1:
        p.error("--workers must be >= 1")
    return FigOptions(Path(args.out), args.quick, args.workers)


def script_main(
    make: Callable[[FigOptions], Path], doc: str | None, argv: Sequence[str] | None = None
) -> int:
    """Entry point shared by the figure scripts (``doc``: the script's docstring)."""
    path = make(options(argv, (doc or "").splitlines()[0]))
    print(path, flush=True)
    return 0
