"""Every figure, in the order ``libra-des figs`` draws them, and the loop that draws them."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from libra_des.figures import (
    attention_straggler,
    bh_grid,
    comm_overlap,
    dp_scaling,
    moe_accuracy,
    moe_breakdown,
    moe_crossover,
    moe_dispatch,
    moe_short_input,
    noise_spread,
    pool_imbalance,
    pool_sweep,
    pp_microbatch,
    step_breakdown,
    throughput,
)
from libra_des.figures.common import Drawn, FigOptions
from libra_des.figures.moe_systems import Imbalance, Throughput, Ttft


@dataclass(frozen=True)
class Entry:
    name: str
    title: str
    make: Callable[[FigOptions], Drawn]


FIGURES: tuple[Entry, ...] = tuple(
    Entry(m.NAME, m.TITLE, m.make)
    for m in (
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
        moe_breakdown,
        Throughput,
        Ttft,
        Imbalance,
        moe_accuracy,
        moe_dispatch,
        moe_short_input,
        moe_crossover,
    )
)
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
