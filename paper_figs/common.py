"""Shared pieces of the paper-style figures: options, seeded sweeps, style, PNG/PDF/CSV output.

Every figure module exposes ``NAME``, ``TITLE`` and ``make(opts) -> Drawn``. Data comes only
through libra_des's Python API (:mod:`libra_des.api`): sweeps (:func:`~libra_des.api.run_sweep`)
into ``OUT/data/<name>-<mode>/`` (so a rerun resumes) or, for the configuration-simulator
figures, :func:`~libra_des.api.replay_plans` (what ``libra-des plan --json`` prints).
Each figure is written as ``NAME.png``, ``NAME.pdf`` and ``NAME.csv`` (exactly the plotted
numbers, one row per plotted value), with a caption line stating scenario, seeds and fidelity.

Modes: *full* (the studies, three seeds: error bars are one standard deviation over seeds),
*quick* (one seed, fewer steps and points), *tiny* (test-only: the smallest layouts that still
exercise every code path; the numbers mean nothing).
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from libra_des import api

if TYPE_CHECKING:
    from matplotlib.figure import Figure

T = TypeVar("T")

#: The shipped scenarios (paper_figs/ sits beside libra_des/ at the project root).
SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
DATASETS = ("256k", "1m")

#: The Libra ablation ladder and the baselines, as balancer overrides (docs/model.md part A).
VARIANTS: dict[str, dict[str, Any]] = {
    "Ulysses": {"balancer.policy": "ulysses"},
    "WLB-LLM": {"balancer.policy": "wlb_llm"},
    "DistCA": {"balancer.policy": "distca"},
    "Libra TAP": {"balancer.policy": "libra", "balancer.vrsp": False, "balancer.pipeliner": False},
    "Libra TAP+VRSP": {
        "balancer.policy": "libra",
        "balancer.vrsp": True,
        "balancer.pipeliner": False,
    },
    "Libra Full": {"balancer.policy": "libra", "balancer.vrsp": True, "balancer.pipeliner": True},
}
ALL_VARIANTS = tuple(VARIANTS)
COLORS = {
    "Ulysses": "#7f7f7f",
    "WLB-LLM": "#bcbd22",
    "DistCA": "#9467bd",
    "Libra TAP": "#aec7e8",
    "Libra TAP+VRSP": "#1f77b4",
    "Libra Full": "#d62728",
    "SGLang": "#7f7f7f",
    "EPLB": "#ff7f0e",
    "Lina": "#2ca02c",
    "HarMoEny": "#9467bd",
    "Libra": "#d62728",
}
#: MoE systems: balancer.policy -> name in words (docs/model.md part B), the shipped ones.
MOE_SYSTEMS = api.moe_systems()
#: A training layout small enough for the test-only mode (2 GPUs, 2 layers, one step).
TINY_TRAINING = (
    "parallelism.dp=2",
    "parallelism.pp=1",
    "parallelism.cp=8",
    "parallelism.gbs=4",
    "balancer.pool_size=2",
    "model.layers=2",
    "steps=1",
)
#: The MoE counterpart: 2 layers, one batch of 4 short requests.
TINY_MOE = ("model.layers=2", "workload.batches=1", "workload.batch=4", "workload.seq_len=128")


@dataclass(frozen=True)
class FigOptions:
    """Where figures go, how much work to do, how many local worker processes."""

    out: Path
    quick: bool = False
    workers: int = 2
    tiny: bool = False

    @property
    def mode(self) -> str:
        return "tiny" if self.tiny else "quick" if self.quick else "full"

    @property
    def seeds(self) -> tuple[int, ...]:
        """Full mode repeats every point over three seeds (error bars); the others use one."""
        return (0, 1, 2) if self.mode == "full" else (0,)

    def data(self, name: str) -> Path:
        """Sweep folder of one figure (modes never share an index)."""
        return self.out / "data" / f"{name}-{self.mode}"

    def pick(self, full: T, quick: T, tiny: T) -> T:
        """The value for this mode."""
        return {"full": full, "quick": quick, "tiny": tiny}[self.mode]


@dataclass(frozen=True)
class Drawn:
    """One finished figure: its files and caption."""

    name: str
    title: str
    caption: str
    files: tuple[Path, ...]


#: One sweep axis: keys that move together, each with its values (``api.AxisLike``).
Axis = dict[str, list[Any]]


def grid(key: str, values: Sequence[Any]) -> Axis:
    return {key: list(values)}


def zipped(columns: Mapping[str, Sequence[Any]]) -> Axis:
    """One axis whose keys move together (all columns the same length)."""
    return {k: list(v) for k, v in columns.items()}


def variant_axis(labels: Sequence[str]) -> Axis:
    """The named variants as one zipped axis; keys a variant leaves out keep defaults."""
    keys = list(dict.fromkeys(k for label in labels for k in VARIANTS[label]))
    defaults = {"balancer.vrsp": True, "balancer.pipeliner": True}
    return zipped({k: [VARIANTS[lb].get(k, defaults.get(k)) for lb in labels] for k in keys})


@dataclass(frozen=True)
class Study:
    """A sweep's results keyed by axis coordinates; each key holds one result per seed."""

    scenario: str
    runs: dict[tuple[int, ...], list[dict[str, Any]]] = field(default_factory=dict)

    def values(self, coords: tuple[int, ...], fn: Callable[[dict[str, Any]], float]) -> np.ndarray:
        return np.array([float(fn(r)) for r in self.runs[coords]])

    def stat(
        self, coords: tuple[int, ...], fn: Callable[[dict[str, Any]], float]
    ) -> tuple[float, float]:
        """Mean over seeds and one standard deviation (0 for a single seed)."""
        v = self.values(coords, fn)
        return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0

    def first(self, coords: tuple[int, ...] = ()) -> dict[str, Any]:
        key = coords or next(iter(self.runs))
        return self.runs[key][0]

    @property
    def layers(self) -> int:
        """Layers the runs simulated (quick and tiny modes cut the model short)."""
        return int(self.first()["scenario"]["model"]["layers"])

    @property
    def fidelity(self) -> str:
        # An MoE prefill scenario has no ``fidelity`` knob (one network model only).
        return str(self.first()["scenario"].get("fidelity", "moe prefill"))


def sweep(
    opts: FigOptions, folder: str, scenario: str, axes: Sequence[Axis], base: Sequence[str] = ()
) -> Study:
    """Run (or resume) one sweep of a shipped scenario over the axes and the mode's seeds.
    A mode's base override of a key an axis sets is left out: the axis sets it at every
    point (a sweep refuses a key set both ways)."""
    swept = [key for axis in axes for key in axis]
    kept = [text for text in base if not any(
        (k := text.partition("=")[0]) == key or k.startswith(key + ".")
        or key.startswith(k + ".") for key in swept)]
    run = api.run_sweep(SCENARIOS / scenario, [*axes, grid("seed", opts.seeds)],
                        opts.data(folder), kept, opts.workers)
    print(
        f"  {scenario}: {len(run.points)} points ({run.ran} run, {run.reused} "
        f"reused) in {run.seconds:.1f} s",
        file=sys.stderr,
    )
    study = Study(Path(scenario).stem)
    for p in run.points:
        study.runs.setdefault(p.coords[:-1], []).append(dict(p.result))
    return study


def replay_plans(opts: FigOptions, name: str, **settings: Any) -> api.PlanReplay:
    """The configuration simulator (:func:`libra_des.api.replay_plans`); its output is kept
    beside the figure's data, as ``plan.json``."""
    data = api.replay_plans(**settings)
    api.write_output(opts.data(name) / "plan.json", json.dumps(data, indent=2) + "\n")
    return data


def spread(sd: Any) -> Any:
    """Error bars for matplotlib: None when every deviation is zero (one seed), so a quick
    figure shows no zero-height whiskers."""
    return sd if np.any(np.asarray(sd) != 0) else None


def seed_sd(values: np.ndarray) -> np.ndarray:
    """Sample standard deviation over the seeds (axis 1 of [point, seed]); 0 for one seed."""
    return values.std(axis=1, ddof=1) if values.shape[1] > 1 else np.zeros(values.shape[0])


def seed_line(ax: Any, x: Any, values: np.ndarray, **style: Any) -> None:
    """The mean over seeds of ``values`` [point, seed] at ``x``, with seed error bars."""
    ax.errorbar(x, values.mean(axis=1), yerr=spread(seed_sd(values)), capsize=3, **style)


@cache
def full_layers(scenario: str) -> int:
    """The layer count of the model a shipped scenario names (what the model's name promises)."""
    name = scenario if scenario.endswith(".yaml") else f"{scenario}.yaml"
    return int(api.load_scenario(SCENARIOS / name).model.layers)


def truncation(scenario: str, layers: int) -> str:
    """'' when the runs simulated the whole model, else what they cut: '8 of 94 layers'."""
    full = full_layers(scenario)
    return "" if layers >= full else f"{layers} of {full} layers"


def model_title(name: str, scenario: str, layers: int) -> str:
    """The model's name as a title may give it: never a truncated run under the bare name."""
    cut = truncation(scenario, layers)
    return f"{name} cut to {cut}" if cut else name


def caption(scenario: str | Study, opts: FigOptions, fidelity: str, extra: str = "") -> str:
    """The line under every figure: scenario, seeds, fidelity, mode; given the study, what
    the runs cut from the model (quick and tiny modes)."""
    seeds = ",".join(map(str, opts.seeds))
    cut = truncation(scenario.scenario, scenario.layers) if isinstance(scenario, Study) else ""
    name = scenario.scenario if isinstance(scenario, Study) else scenario
    text = f"scenario {name}; seeds {seeds}; fidelity {fidelity}; {opts.mode} mode"
    if cut:
        text += f"; simulated {cut} (whole-model values are for that slice)"
    if len(opts.seeds) > 1:
        text += "; error bars: 1 s.d. over seeds"
    return f"{text}; {extra}" if extra else text


def new_figure(ncols: int = 1, width: float = 6.4, height: float = 4.2) -> tuple[Figure, Any]:
    """A figure of ``ncols`` panels. matplotlib is imported here, not at module level (the
    ``figs`` extra is optional), and through its object API: no pyplot state, no display."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * ncols, height), layout="constrained")
    axes = fig.subplots(1, ncols, squeeze=False)
    return fig, axes[0]


def write_csv(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """Rows of plotted values; the header is the union of the rows' keys in first-seen order."""
    header = list(dict.fromkeys(k for row in rows for k in row))
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=header)
    writer.writeheader()
    writer.writerows(rows)
    api.write_output(path, text.getvalue())


def save(
    fig: Figure,
    opts: FigOptions,
    name: str,
    title: str,
    text: str,
    rows: Sequence[Mapping[str, Any]],
) -> Drawn:
    """Write ``NAME.png``, ``NAME.pdf`` and ``NAME.csv``; the caption goes under the axes."""
    if not rows:
        raise ValueError(f"figure {name}: no plotted values")
    fig.text(0.5, -0.01, text, ha="center", va="top", fontsize=8, color="#444444")
    opts.out.mkdir(parents=True, exist_ok=True)
    files = []
    for ext, dpi in (("png", 60 if opts.tiny else 150), ("pdf", None)):
        path = opts.out / f"{name}.{ext}"
        buf = io.BytesIO()  # written through the output-folder policy (a manifest entry)
        fig.savefig(buf, format=ext, dpi=dpi, bbox_inches="tight")
        api.write_output(path, buf.getvalue())
        files.append(path)
    write_csv(opts.out / f"{name}.csv", rows)
    return Drawn(name, title, text, (*files, opts.out / f"{name}.csv"))


def label_axes(ax: Any, x: str, y: str, title: str = "") -> None:
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
