"""Preflight: refuse, before any work, runs this machine cannot finish; check run options.

Each kind's estimate (:func:`training_estimate`, :func:`moe_estimate`; looked up through the
kind registry by :mod:`libra_des.kinds.feasibility`) is a run's peak memory and its CPU seconds
(what a user waits for on an idle machine) from the sizes that drive them
(:func:`training_terms`, :func:`moe_terms`). The coefficients are data, in ``preflight.yaml``
beside this module, together with the measured runs that set them
(``benchmarks/preflight_check.py --measure --write --fit`` measures, fits and writes both;
without flags it prints every case's estimate against its measurement). The time estimate aims
at the measured time times the file's ``seconds_margin`` (within 3x either way on every
measured case); the memory estimate is at or above every measured peak (each kind's
``bytes_margin``).

A run estimated above the memory this machine has available (``MemAvailable``) or above
:data:`MAX_SECONDS` is an input error naming the estimate; ``--no-preflight`` overrides. A
network model that the data file does not know (a third party's) stretches the fast
estimate by its registration's ``training_wall`` / ``moe_wall``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from libra_des.config.yaml_text import package_yaml
from libra_des.errors import InputError
from libra_des.kinds.estimate import Estimate

if TYPE_CHECKING:  # annotations only: ``plan``'s size checks need no scenario models
    from libra_des.config import MoeScenario, TrainingScenario

#: Longest run accepted without ``--no-preflight``: one day (our choice).
MAX_SECONDS = 24 * 3600.0
#: Most trace events written by ``--trace`` (about 200 bytes each, so about 400 MB of JSON;
#: Perfetto's UI becomes unusable well before): our choice.
MAX_TRACE_EVENTS = 2_000_000
BASE_BYTES = 250e6  # interpreter, numpy, SimPy, networkx (measured: about 110 MB)
#: The coefficients and the measurements that set them.
DATA = Path(__file__).with_name("preflight.yaml")


@cache
def coefficients() -> Mapping[str, Any]:
    """``preflight.yaml`` (read once)."""

    data: Mapping[str, Any] = package_yaml(DATA)
    return data


def mean_sample_tokens(sc: TrainingScenario) -> float:
    """A low guess of the mean raw sample length (low -> more samples -> conservative)."""
    dist = sc.workload.lengths
    if dist is None:
        return 1.0
    guess = float(dist.value or dist.median or 256.0)
    if dist.max is not None:
        guess = min(guess, float(dist.max))  # a cap below the median shortens every sample
    return max(guess, float(dist.min), 1.0)


def training_terms(sc: TrainingScenario) -> dict[str, float]:
    """The sizes a training run's cost grows with, per step: W^2 entries of a pool's byte
    matrices (W lockstep workers per pool), samples, GPUs, pipeline ops and TAP blocks."""
    # Lazy: ``libra-des plan`` needs only check_plan_sizes, and these pull in the planner.
    from libra_des.plan.step import pool_size_of
    from libra_des.sim.training.tap_autotune import MIN_BLOCK

    par = sc.parallelism
    pool = pool_size_of(sc)
    block = sc.balancer.block_size
    # ``auto`` may pick the smallest candidate block: the conservative (most blocks) guess.
    size = block if isinstance(block, int) else MIN_BLOCK
    return {
        "pool_pairs": float((pool * par.cp) ** 2),
        "samples": par.gbs * sc.workload.packed_length / mean_sample_tokens(sc),
        "gpus": float(par.gpus),
        "ops": float((par.dp // pool) * par.pp * 2 * par.microbatches * par.virtual_stages),
        "blocks": par.gbs * sc.workload.packed_length / min(size, sc.workload.packed_length),
    }


def linear(weights: Mapping[str, float], terms: Mapping[str, float]) -> float:
    """``sum(weights[k] * terms[k])`` over the terms (a missing weight is 0)."""
    return sum(float(weights.get(k, 0.0)) * v for k, v in terms.items())


def training_estimate(sc: TrainingScenario) -> Estimate:
    data = coefficients()["training"]
    terms = training_terms(sc)
    per_step_s = linear(data["seconds"], terms)
    per_step_bytes = linear(data["bytes"], terms)
    stretch = data.get("fidelity", {}).get(sc.fidelity)
    if stretch is not None:  # a shipped model the data file prices itself
        per_step_s += float(stretch["seconds_per_gpu"]) * terms["gpus"] ** float(
            stretch["gpu_exponent"])
        per_step_bytes += float(stretch["bytes_per_gpu"]) * terms["gpus"]
    else:
        from libra_des.sim.network import models as network_models

        per_step_s *= network_models.get(sc.fidelity).training_wall(sc.parallelism.gpus)
    # A measured per-item floor (blocks, samples) for sizes the fitted cases never reached.
    per_step_bytes = max(per_step_bytes, linear(data.get("floor_bytes", {}), terms))
    # Steps run one after another; each keeps its records (about a tenth of its peak).
    memory = float(data["start_bytes"]) + per_step_bytes * (1 + 0.1 * (sc.steps - 1))
    seconds = float(data["start_s"]) + per_step_s * sc.steps
    return with_margins(data, memory, seconds)


def with_margins(section: Mapping[str, Any], memory: float, seconds: float) -> Estimate:
    """The fitted memory times the kind's ``bytes_margin`` (every measured peak covered) and
    the fitted time times the file's time margin."""
    margin = float(coefficients()["seconds_margin"])
    return Estimate(memory * float(section["bytes_margin"]), seconds * margin)


def moe_terms(sc: MoeScenario) -> dict[str, float]:
    """The sizes an MoE prefill run's cost grows with: routed (token x layer) slots of the
    batches and of the routing profile, layers of 16K-token batches, and the stage graph's
    GPU-layers (EP GPUs x MoE layers x batches)."""
    m, w = sc.model, sc.workload
    moe_layers = max(m.layers - m.dense_layers, 1)
    routing = w.routing
    profile_tokens = (routing.profile_requests if routing else 32) * w.seq_len
    return {
        "routed_slots": float(m.top_k * moe_layers * w.batches * w.batch * w.seq_len),
        "profile_slots": float(m.top_k * moe_layers * profile_tokens),
        "batch_layers": float(w.batches * moe_layers
                              * max(1.0, w.batch * w.seq_len / 16_384)),
        "gpu_layers": float(sc.parallelism.ep * moe_layers * w.batches),
        "experts": float(m.experts),
    }


def moe_estimate(sc: MoeScenario) -> Estimate:
    data = coefficients()["moe"]
    terms = moe_terms(sc)
    seconds = linear(data["seconds"], terms)
    stretch = data.get("fidelity", {}).get(sc.fidelity)
    if stretch is not None:
        seconds += float(stretch["seconds_per_gpu_layer"]) * terms["gpu_layers"] * \
            sc.parallelism.ep
    else:
        from libra_des.sim.network import models as network_models

        seconds *= network_models.get(sc.fidelity).moe_wall(sc.parallelism.ep)
    memory = float(data["start_bytes"]) + linear(data["bytes"], terms)
    return with_margins(data, memory, seconds + float(data["start_s"]))


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


# ----------------------------------------------------------------------------- traces


def pipeline_entities(sc: TrainingScenario) -> int:
    """Rank groups a training trace can show (pipeline entities: pools or replicas)."""
    from libra_des.plan.step import pool_size_of

    return max(sc.parallelism.dp // pool_size_of(sc), 1)


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
