"""One calibration: validate the options, measure, fit, cross-validate, write the outputs.

Collectives are measured first: on a CPU the ranks are forked before this process starts
any OpenMP thread pool (forking after one is used can hang the children). The profile starts
from the device's datasheet without its fits, so every fit in the output comes from this run;
cross-validation (leave one size out) is stored in each fit and drawn in ``validation.html``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from rich.console import Console

from libra_des.base.numbers import with_unit
from libra_des.calibrate.sizes import ALL_OPS, COLLECTIVES, KERNEL_OPS, SIZE_SETS, SOURCE, Sizes
from libra_des.errors import InputError
from libra_des.hardware.profiles.fitting import FitResult, fit_profile
from libra_des.hardware.profiles.profile import (
    Interference,
    Profile,
    Sample,
    datasheet_for,
    load_profile,
    save_profile,
)

LOG = Console(stderr=True)


@dataclass(frozen=True)
class Options:
    """A validated calibration request (defaults as the flags')."""

    cuda: bool
    ops: tuple[str, ...] = ALL_OPS
    world: int = 2
    sizes: Sizes = SIZE_SETS[("cpu", "quick")]
    base: str = "auto"
    seed: int = 0
    name: str = "profile"


def cpu_cores() -> int:
    """CPU cores this process may run on (its affinity where the OS tells it)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def options(device: str, ops_text: str, world: int | None, size_set: str, base: str,
            seed: int, name: str, preflight: bool = True) -> Options:
    """Check every choice against this machine before anything is measured: gloo ranks on a
    CPU no more than its cores (each rank runs its benchmarks on one), unless ``preflight``
    is off."""
    if world is not None and (isinstance(world, bool) or not isinstance(world, int)
                              or world < 1):
        raise InputError("--world", world, "an integer >= 1 (ranks)")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError("--seed", seed, "an integer >= 0 (numpy's random seed)")
    import torch

    if device not in ("auto", "cuda", "cpu"):
        raise InputError("--device", device, "auto | cuda | cpu")
    have_cuda = torch.cuda.is_available()
    if device == "cuda" and not have_cuda:
        raise InputError("--device", "cuda", "cpu | auto (torch sees no CUDA device)")
    cuda = device == "cuda" or (device == "auto" and have_cuda)
    ops = tuple(o.strip() for o in ops_text.split(",") if o.strip())
    bad = [o for o in ops if o not in ALL_OPS]
    if bad or not ops:
        raise InputError("--ops", ops_text, "a comma-separated subset of " + ",".join(ALL_OPS))
    if size_set not in ("quick", "full"):
        raise InputError("--sizes", size_set, "quick | full")
    gpus = torch.cuda.device_count() if cuda else 0
    ranks = world if world is not None else (gpus if cuda else 2)
    wants_ranks = any(o in COLLECTIVES for o in ops)
    if cuda and not 1 <= ranks <= gpus:
        raise InputError("--world", ranks, f"1..{gpus} (the visible GPUs)")
    if not cuda and wants_ranks and not 2 <= ranks <= 64:
        raise InputError("--world", ranks, "2..64 gloo ranks for collectives")
    cores = cpu_cores()
    if not cuda and preflight and ranks > cores:
        raise InputError("--world", ranks, f"1..{cores} gloo ranks (this machine's CPU cores; "
                         "--no-preflight runs more, oversubscribed)")
    sizes = SIZE_SETS[("cuda" if cuda else "cpu", size_set)]
    return Options(cuda, ops, ranks, sizes, base, seed, name)


def base_profile(opt: Options, device: str) -> Profile:
    """The datasheet the profile starts from, without its fits (every fit in the output
    comes from this run's measurements)."""
    if opt.base != "auto":
        base = load_profile(opt.base)
    elif opt.cuda:
        base = datasheet_for(device)
    else:
        base = load_profile(None)  # a CPU takes kernel-model start values only
    gpu = base.gpu if opt.cuda and opt.base == "auto" else None
    return base.model_copy(update={"fits": (), "samples": (), "interference": (),
                                   "gpu": gpu or ("CPU" if not opt.cuda else device),
                                   "gpu_count": opt.world})


def collect(opt: Options, tmp: str) -> tuple[list[Sample], list[Interference]]:
    """Every sample and interference case of the chosen ops (module doc: collectives first)."""
    import torch

    from libra_des.calibrate.kernels import KernelBench, flash_varlen
    from libra_des.calibrate.ranks import CollectivePlan, run_collectives

    samples: list[Sample] = []
    overlaps: list[Interference] = []
    coll = tuple(o for o in opt.ops if o in COLLECTIVES)
    if coll and opt.world >= 2:
        plan = CollectivePlan(
            backend="nccl" if opt.cuda else "gloo", world=opt.world, ops=coll,
            sizes=opt.sizes.coll_bytes, repeats=opt.sizes.coll_repeats,
            store=os.path.join(tmp, "store"), result=os.path.join(tmp, "collectives.json"),
            overlap_gemm=opt.sizes.overlap_gemm, overlap_bytes=opt.sizes.overlap_bytes,
        )
        t0 = time.perf_counter()
        samples, overlaps = run_collectives(plan, opt.cuda)
        LOG.log(f"collectives on groups {plan.groups}: {len(samples)} samples, "
                f"{len(overlaps)} interference cases in {with_unit(time.perf_counter() - t0, 's')}")
    elif coll:
        LOG.log(f"[yellow]skipping {','.join(coll)}: one GPU visible, a collective needs two")
    device = torch.device("cuda", 0) if opt.cuda else torch.device("cpu")
    if not opt.cuda:
        # One thread: intra-op thread pools make CPU timings swing with any other load on
        # the host; the CPU profile describes one core (its probes run on one thread too).
        torch.set_num_threads(1)
    bench = KernelBench(device, opt.sizes, np.random.default_rng(opt.seed))
    flash = flash_varlen(device)
    runs: dict[str, Callable[[], list[Sample]]] = {
        "attention": lambda: bench.attention(flash),
        "gemm": bench.gemm,
        "grouped_gemm": bench.grouped_gemm,
    }
    for op in (o for o in KERNEL_OPS if o in opt.ops):
        t0 = time.perf_counter()
        got = runs[op]()
        samples += got
        LOG.log(f"{op}: {len(got)} samples in {with_unit(time.perf_counter() - t0, 's')}")
    return samples, overlaps


def measure_and_fit(opt: Options, cv: bool) -> tuple[Profile, list[FitResult]]:
    """The fitted profile with its samples and interference cases, and the fit results."""
    import torch

    from libra_des.calibrate.host import measure_host
    from libra_des.calibrate.kernels import flash_varlen
    from libra_des.calibrate.machine import cpu_profile, device_name, software

    name = device_name(opt.cuda)
    LOG.log(f"calibrating {name} ({'NCCL' if opt.cuda else 'gloo'}, world {opt.world})")
    base = base_profile(opt, name)
    with tempfile.TemporaryDirectory(prefix="libra-des-harness-") as tmp:
        samples, overlaps = collect(opt, tmp)
    if not opt.cuda:
        base = cpu_profile(base, opt.world, [s for s in samples if s.op == "gemm"])
    flash = flash_varlen(torch.device("cuda" if opt.cuda else "cpu")) is not None
    t0 = time.perf_counter()
    host = measure_host(device_name(False), opt.seed, opt.cuda)
    LOG.log(f"host stages: per-call costs and {len(host.checks)} stage checks in "
            f"{with_unit(time.perf_counter() - t0, 's')}")
    prof = base.model_copy(update={
        "host": host,
        "name": opt.name, "device": name, "software": software(opt.cuda, flash),
        "source": SOURCE, "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "interference": tuple(overlaps),
    })
    fitted, results = fit_profile(prof.with_samples(tuple(samples)), cv=cv)
    return fitted.with_samples(tuple(samples)), results


def calibrate(opt: Options, profile_path: Path, page_path: Path | None, cv: bool) -> int:
    """Measure, fit (and cross-validate), write the profile and, if asked, the page."""
    started = time.perf_counter()
    prof, results = measure_and_fit(opt, cv)
    save_profile(prof, profile_path)
    if page_path is not None:
        from libra_des.calibrate.page import write_page

        write_page(prof, results, page_path)
    took = time.perf_counter() - started
    wrote = f"{profile_path}" + (f" and {page_path}" if page_path is not None else "")
    LOG.log(f"wrote {wrote}: {len(prof.samples)} samples, {len(results)} fits in "
            f"{with_unit(took, 's')}")
    return 0


def torch_missing() -> str | None:
    """None when torch is importable; else the one line saying how to get it."""
    import importlib.util

    if importlib.util.find_spec("torch") is not None:
        return None
    return ("error: calibrate: needs torch; install the calibrate extra: "
            "pip install -c constraints.txt -e '.[calibrate]'")


def fail(exc: InputError) -> int:
    sys.stderr.write(exc.line() + "\n")
    return 2
