"""Preflight: refuse, before any work, runs this machine cannot finish; check run options.

:func:`estimate` gives a rough upper estimate of a run's peak memory and wall time from the
sizes that drive them. The coefficients are *measured* on this project's CI-class machine
(2 shared cores; ``/usr/bin/time`` of ``libra-des run``) and rounded up: per W^2 entry of a
pool's byte matrices (W workers per pool), per GPU, per sample, per op, per TAP block, and
for MoE prefill per (batch x MoE layer) of 16K tokens. The measured runs behind them are in
benchmarks/README.md ("Figures that docstrings used to carry").

A run estimated above the memory this machine has available (``MemAvailable``) or above
:data:`MAX_SECONDS` is an input error naming the estimate; ``--no-preflight`` overrides.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

import libra_des.kinds as kinds
from libra_des.errors import InputError
from libra_des.kinds.estimate import Estimate

if TYPE_CHECKING:  # annotations only: ``plan``'s size checks need no scenario models
    from libra_des.config import MoeScenario, Scenario, TrainingScenario

#: Longest run accepted without ``--no-preflight``: one day (our choice).
MAX_SECONDS = 24 * 3600.0
#: Most trace events written by ``--trace`` (about 200 bytes each, so about 400 MB of JSON;
#: Perfetto's UI becomes unusable well before): our choice.
MAX_TRACE_EVENTS = 2_000_000
BASE_BYTES = 250e6  # interpreter, numpy, SimPy, networkx (measured: about 110 MB)


def mean_sample_tokens(sc: TrainingScenario) -> float:
    """A low guess of the mean raw sample length (low -> more samples -> conservative)."""
    dist = sc.workload.lengths
    if dist is None:
        return 1.0
    guess = float(dist.value or dist.median or 256.0)
    if dist.max is not None:
        guess = min(guess, float(dist.max))  # a cap below the median shortens every sample
    return max(guess, float(dist.min), 1.0)


def training_estimate(sc: TrainingScenario) -> Estimate:
    # Lazy: ``libra-des plan`` needs only check_plan_sizes, and these pull in the cost model.
    from libra_des.plan.step import pool_size_of
    from libra_des.sim.network import models as network_models
    from libra_des.sim.training.tap_autotune import MIN_BLOCK

    par = sc.parallelism
    workers = pool_size_of(sc) * par.cp  # W: one pool's lockstep workers
    samples = par.gbs * sc.workload.packed_length / mean_sample_tokens(sc)
    ops = (par.dp // pool_size_of(sc)) * par.pp * 2 * par.microbatches * par.virtual_stages
    # TAP blocks of the window (the quickstart's 16K blocks: 16,384 per step, a few MB).
    block = sc.balancer.block_size
    # ``auto`` may pick the smallest candidate block: the conservative (most blocks) guess.
    size = block if isinstance(block, int) else MIN_BLOCK
    blocks = par.gbs * sc.workload.packed_length / min(size, sc.workload.packed_length)
    per_step_bytes = (150.0 * workers**2 + 200.0 * samples + 10e3 * par.gpus + 2e3 * ops
                      + 200.0 * blocks)
    per_step_s = (2e-6 * workers**2 + 5e-6 * samples + 5e-4 * par.gpus + 2e-4 * ops
                  + 2e-5 * blocks)
    per_step_s *= network_models.get(sc.fidelity).training_wall(par.gpus)
    # Steps run one after another; each keeps its records (about a tenth of its peak).
    memory = BASE_BYTES + per_step_bytes * (1 + 0.1 * (sc.steps - 1))
    return Estimate(memory, 3.0 + per_step_s * sc.steps)


def moe_estimate(sc: MoeScenario) -> Estimate:
    from libra_des.sim.network import models as network_models  # lazy: as training's

    m, w = sc.model, sc.workload
    moe_layers = max(m.layers - m.dense_layers, 1)
    tokens = w.batch * w.seq_len
    routing = w.routing
    profile_tokens = (routing.profile_requests if routing else 32) * w.seq_len
    trace_bytes = 4.0 * m.top_k * moe_layers * (tokens + profile_tokens)
    scratch = 4.0 * 2048 * m.experts * 4  # generator chunk scores
    memory = BASE_BYTES + trace_bytes + scratch + 64.0 * tokens * m.top_k
    per_layer = 0.1 * max(1.0, tokens / 16_384)
    # The network model's stretch of a layer's wall (its registration says why).
    per_layer *= network_models.get(sc.fidelity).moe_wall(sc.parallelism.ep)
    seconds = 3.0 + w.batches * moe_layers * per_layer + 2e-6 * profile_tokens * moe_layers
    return Estimate(memory, seconds)


def estimate(sc: Scenario) -> Estimate:
    """The scenario kind's estimate (:mod:`libra_des.kinds`)."""
    return kinds.kind_of(sc).estimate(sc)


def available_bytes() -> float:
    """Memory this machine can give now (``MemAvailable``; physical memory if unknown)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (OSError, ValueError, AttributeError):
        return math.inf


def check_feasible(sc: Scenario, flag: str = "--no-preflight") -> Estimate:
    """Refuse a scenario whose estimate exceeds this machine's memory or a day of wall time."""
    est = estimate(sc)
    have = available_bytes()
    if est.bytes > 0.8 * have:
        raise InputError("scenario", f"needs {est.text()}",
                         f"a run within 80% of the {have / 1e9:.3g} GB available here "
                         f"(make it smaller, or pass {flag} to try anyway)")
    if est.seconds > MAX_SECONDS:
        raise InputError("scenario", f"needs {est.text()}",
                         f"a run under {MAX_SECONDS / 3600:.0f} h (make it smaller, "
                         f"or pass {flag} to try anyway)")
    return est


# ----------------------------------------------------------------------------- traces


def pipeline_entities(sc: TrainingScenario) -> int:
    """Rank groups a training trace can show (pipeline entities: pools or replicas)."""
    from libra_des.plan.step import pool_size_of

    return max(sc.parallelism.dp // pool_size_of(sc), 1)


def trace_ranks(
    sc: Scenario, want_trace: bool, text: str | None, parsed: list[int] | None
) -> list[int] | None:
    """Validate ``--trace``/``--trace-ranks`` against the scenario; deduplicated, ordered.

    ``text`` is what the user typed (for messages); ``parsed`` its integers, already checked
    to be >= 0 by the command that read them.
    """
    if text is not None and not want_trace:
        raise InputError("--trace-ranks", text, "only together with --trace")
    return kinds.kind_of(sc).trace_ranks(sc, want_trace, text, parsed)


def training_trace_ranks(
    sc: TrainingScenario, want_trace: bool, text: str | None, parsed: list[int] | None
) -> list[int] | None:
    """Rank groups of a training trace: within the scenario's pipeline entities, bounded."""
    ranks = None
    if text is not None and parsed is not None:
        count = pipeline_entities(sc)
        ranks = sorted(set(parsed))
        bad = [r for r in ranks if r >= count]
        if bad:
            raise InputError("--trace-ranks", bad[0], f"rank groups 0..{count - 1} "
                             f"(this scenario has {count})")
    if want_trace:
        chosen = len(ranks) if ranks is not None else pipeline_entities(sc)
        par = sc.parallelism
        events = chosen * par.pp * 4 * par.microbatches * par.virtual_stages * sc.steps
        if events > MAX_TRACE_EVENTS:
            raise InputError("--trace", f"about {events:,} events",
                             f"<= {MAX_TRACE_EVENTS:,} events (pick groups with --trace-ranks)")
    return ranks


def moe_trace_ranks(
    sc: MoeScenario, want_trace: bool, text: str | None, _parsed: list[int] | None
) -> None:
    """An MoE trace shows every GPU of the EP group; bound its size like a training one's."""
    if text is not None:
        raise InputError("--trace-ranks", text,
                         "training scenarios only (an MoE trace shows every GPU)")
    if want_trace:
        # About a dozen stages per GPU per MoE layer (sim/moe/batch.build_graph).
        events = 12 * sc.workload.batches * sc.model.layers * sc.parallelism.ep
        if events > MAX_TRACE_EVENTS:
            raise InputError("--trace", f"about {events:,} events",
                             f"<= {MAX_TRACE_EVENTS:,} events (fewer workload.batches)")


# ----------------------------------------------------------------------------- plan

#: Most (policy, P, H, B) rows of one ``plan`` call: our choice (each row replays every window).
MAX_PLAN_ROWS = 10_000


def check_plan_sizes(gbs: int, cp: int, pool_sizes: tuple[int, ...], rows: int,
                     windows: int, packed_length: int, block: int = 16_384) -> None:
    """Bounds of the configuration simulator's flags and a memory estimate of its largest pool."""
    for flag, value, hi, why in (
        ("--gbs", gbs, 1 << 16, "packed sequences per window"),
        ("--cp", cp, 4096, "context-parallel workers per sequence"),
        ("--windows", windows, 10_000, "windows to replay"),
    ):
        if value > hi:
            raise InputError(flag, value, f"<= {hi:,} ({why})")
    if cp > packed_length:
        raise InputError("--cp", cp, f"<= the packed length {packed_length:,} tokens")
    if rows > MAX_PLAN_ROWS:
        raise InputError("--pool-size/--heads-split/--block-size/--policy", f"{rows} rows",
                         f"<= {MAX_PLAN_ROWS:,} combinations")
    workers = max(pool_sizes) * cp
    need = BASE_BYTES + 150.0 * workers**2
    have = available_bytes()
    blocks = max(pool_sizes) * packed_length / min(block, packed_length)
    if 200.0 * blocks > 0.8 * have or 2e-5 * blocks * windows * rows > MAX_SECONDS:
        raise InputError("--block-size", block, f"blocks of at least {packed_length // 4096:,} "
                         "tokens (smaller ones make too many TAP tiles to plan)")
    if need > 0.8 * have:
        raise InputError("--cp", cp, f"P x cp workers whose W^2 exchange plan fits in memory "
                         f"(P {max(pool_sizes)} x cp {cp} needs about {need / 1e9:.3g} GB, "
                         f"{have / 1e9:.3g} GB available)")
