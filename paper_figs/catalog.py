"""The figure registry: every figure, in the order ``libra-des figs`` draws them, and the loop
that draws them.

A figure is a module exposing ``NAME`` (its file names), ``TITLE`` and ``make(opts) -> Drawn``;
registering one is adding its module to :data:`MODULES` (grouped by paper). ``libra-des figs``
reads :data:`FIGURES` and nothing else, so a figure listed here is drawn, listed by ``--list``
and selectable by ``--only NAME``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from paper_figs.common import Drawn, FigOptions
from paper_figs.libra_moe import (
    crossover,
    dispatch_skew,
    hiding,
    imbalance,
    layer_breakdown,
    predictor_accuracy,
    short_input,
    ttft,
)
from paper_figs.libra_moe import throughput as moe_throughput
from paper_figs.libra_train import (
    attention_straggler,
    bh_grid,
    comm_overlap,
    dp_scaling,
    noise_spread,
    pool_imbalance,
    pool_sweep,
    pp_microbatch,
    step_breakdown,
    throughput,
    winner_map,
)


@dataclass(frozen=True)
class Entry:
    name: str
    title: str
    make: Callable[[FigOptions], Drawn]


#: The registered figure modules, in drawing order: the training paper's, then the MoE paper's.
MODULES = (
    noise_spread,
    pool_imbalance,
    bh_grid,
    dp_scaling,
    pp_microbatch,
    attention_straggler,
    pool_sweep,
    step_breakdown,
    comm_overlap,
    throughput,
    winner_map,
    layer_breakdown,
    moe_throughput,
    ttft,
    imbalance,
    predictor_accuracy,
    dispatch_skew,
    short_input,
    crossover,
    hiding,
)
FIGURES: tuple[Entry, ...] = tuple(Entry(m.NAME, m.TITLE, m.make) for m in MODULES)
NAMES = tuple(e.name for e in FIGURES)


@dataclass(frozen=True)
class Outcome:
    name: str
    drawn: Drawn | None
    seconds: float
    error: str = ""


def draw(
    entries: Sequence[Entry], opts: FigOptions, done: Callable[[Outcome], None] = lambda _o: None
) -> list[Outcome]:
    """Draw each figure; one broken figure is reported and does not stop the others."""
    out = []
    for entry in entries:
        began = time.perf_counter()
        try:
            outcome = Outcome(entry.name, entry.make(opts), time.perf_counter() - began)
        except Exception as exc:
            outcome = Outcome(
                entry.name, None, time.perf_counter() - began, f"{type(exc).__name__}: {exc}"
            )
            print(f"  {entry.name} failed: {outcome.error}", file=sys.stderr)
        done(outcome)
        out.append(outcome)
    return out
