"""Process start-up and process tuning: numba's set-up and kernel cache folder (for the
library), and the process-wide speed measures only a command or an explicit
:func:`tune_process` applies.

**What the library does in any host** (a notebook, a Ray worker, a program that uses numba
itself), leaving the process as it found it (``tests/test_host_state.py`` checks the
collector, glibc's mmap threshold, the environment and numba's settings around a run):

* **numba's cache.** Every compiled kernel (:mod:`libra_des.base.kernel`) is cached on disk,
  in one writable per-user folder rather than next to the installed sources (which may be
  read-only, and are shared by every user of an installation): ``$LIBRA_DES_CACHE`` if set,
  else ``$XDG_CACHE_HOME/libra-des/numba``, else ``~/.cache/libra-des/numba``, and there a
  subfolder named by a digest of the kernels' sources and what they import
  (:mod:`libra_des.base.kernel_sources`: numba itself notices changes to a kernel's own file
  only). Each kernel gets its own cache object pointing there; numba's process-wide settings
  (``numba.config.CACHE_DIR``, ``NUMBA_CACHE_DIR``, its list of cache locators) are never
  touched, so a host's own jitted functions cache where the host said. The first compile
  into a folder from given source files prints one line to stderr (a marker file per
  source location and stamp remembers it: numba keys its cache on both, so a second clone
  compiles again), since it takes a while once.
* **numba's set-up.** Its typing and target registries are built once, at its import, with
  the collector paused meanwhile (:func:`numba_target`; its state is restored after).

**Process tuning** (:func:`tune_process`: called by the CLI's entry point, by the sweep's
own worker processes, or by a user who wants a command's speed in their own process; never
by an import or an API call), each measured on the commands' runs (benchmarks/README.md):

* **The collector.** What exists when tuning starts, and numba's registries when they are
  built, are frozen (``gc.freeze``): about 80,000 long-lived objects a full collection would
  otherwise walk again and again. :func:`long_lived_run` freezes what exists when a
  training run starts and makes young collections rarer while it runs: a detailed run
  builds hundreds of thousands of long-lived containers (each link's route sets, the
  topology's link records) and every full pass walks them all; at its end the whole frozen
  generation thaws (what was frozen before too), so the run's objects can be collected.
  Untuned, a run leaves the collector alone.
* **numba's BLAS check** is skipped while its registries load (:func:`blas_check_skipped`;
  it would import all of scipy.linalg and start scipy's OpenBLAS threads): numba keeps that
  answer for the process, so only a tuned process gets it.
* **The C heap.** :func:`reuse_heap` has glibc keep and reuse freed memory for allocations
  up to 32 MiB instead of mapping fresh, kernel-zeroed pages for each numpy temporary of a
  few MiB.

**OpenBLAS's worker threads** (numpy's BLAS, and scipy's own copy, which loads with
scipy.linalg: the flow network's solver imports it) spin-wait on the other cores after the
library loads, whether or not any BLAS call follows; on a busy machine that CPU is taken
from the command itself. The CLI runs the commands of :data:`ONE_BLAS_THREAD`, which do no
large linear algebra, with one BLAS thread (:func:`blas_threads`; ``plan``'s BLAS calls are
dot products over one packed sequence's sample lengths; ``tests/test_startup_imports.py``
checks its output equals a run with four threads).
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType

#: Commands started with one OpenBLAS thread (no large linear algebra; see the docstring).
ONE_BLAS_THREAD = frozenset({"plan"})
#: The variables OpenBLAS reads its thread count from, in its order of precedence: a user's
#: own setting of any of them is left alone.
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
#: glibc's ``mallopt`` parameters (malloc.h): the free heap top kept before it is given back
#: to the system, and the size from which an allocation gets its own fresh mapping.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
#: Allocations up to this size come from the heap and reuse freed memory: 32 MiB, the largest
#: value glibc accepts on 64-bit systems (and the ceiling of its own adaptive threshold).
HEAP_ALLOCATION_MAX = 32 << 20
#: Free memory the heap keeps for later allocations instead of returning it (our assumption:
#: a few times the largest heap allocation; peak RSS of the 131k-GPU step 610 -> 621 MiB).
HEAP_KEEP = 256 << 20
#: Allocations between young collections while a training run runs, against CPython's 700 (our
#: choice, measured: a detailed 16,384-GPU step spent 13.7 s of 115 s in 7,873 collections,
#: 9.0 s of it in 38 full passes over up to 0.5 M objects; with this, 0.7 s in 165; fast
#: mode and MoE runs spend 0.1 s either way; benchmarks/README.md). Cyclic garbage waits
#: longer to be freed; the run's own data is mostly acyclic, freed by reference counts.
YOUNG_COLLECTION = 100_000
#: The file whose presence in the cache folder says its kernels were compiled once already
#: from these source files (its name ends in :func:`kernel_sources.stamp`: a second clone of
#: the same sources shares the folder but numba compiles its kernels again).
COMPILED_MARKER = "compiled-once"
#: What the first compile into an empty cache folder costs, for its one line (measured on
#: the 2-core development machine: every kernel module, fresh folder; benchmarks/README.md).
FIRST_COMPILE_S = 60


def cache_folder(env: os._Environ[str] | dict[str, str] = os.environ) -> Path:
    """numba's cache folder: ``$LIBRA_DES_CACHE``, ``$XDG_CACHE_HOME/libra-des/numba`` or
    ``~/.cache/libra-des/numba``, in that order."""
    if env.get("LIBRA_DES_CACHE"):
        return Path(env["LIBRA_DES_CACHE"]).expanduser()
    base = env.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(base) / "libra-des" / "numba"


@dataclass
class Tuning:
    """Whether :func:`tune_process` ran in this process (the library's own record of it)."""

    on: bool = False


#: This process's tuning: off until :func:`tune_process`.
TUNING = Tuning()


def tune_process() -> None:
    """Tune this whole process for simulation speed, as ``libra-des`` commands run: the
    collector freezes what exists now and numba's registries once built, and makes young
    collections rarer during each training run (:func:`long_lived_run`); numba skips its BLAS
    check (:func:`blas_check_skipped`); glibc reuses freed heap memory (:func:`reuse_heap`).

    Process-wide and not undone (and each training run thaws the whole frozen generation
    at its end, what the process froze itself too): call it once, early, in a process of
    your own (a script that runs many simulations), not in a host whose collector or
    allocator others rely on (a notebook kernel, a Ray worker). Results are the same either
    way; only speed differs (README, "Python API"). Nothing in the library calls it except
    the CLI's entry point and the sweep's own worker processes."""
    TUNING.on = True
    gc.freeze()
    reuse_heap()


@cache
def numba_target() -> ModuleType:
    """numba imported and its CPU target's typing and lowering registries built, once per
    process, with the collector paused meanwhile (its state is restored after); in a tuned
    process (:func:`tune_process`) what exists then is frozen (``gc.freeze``) and numba's
    BLAS check is skipped while the registries load.

    numba builds the registries on a process's first kernel dispatch: with numba's import,
    about 80,000 long-lived objects the collector tracks (``gc.get_objects``), which it would
    otherwise walk while they are built (and, unless frozen, in every full collection after:
    measured, most of a ``scale-16384`` step's collection time, benchmarks/README.md, "The
    closing round"). Frozen objects are never collected: modules and registries live as
    long as the process anyway.

    While the registries load in a tuned process, numba's BLAS check answers "none"
    (:func:`blas_check_skipped`): numba's lowering of ``np.correlate`` and ``np.convolve``
    asks once, at import, whether BLAS exists, by importing scipy.linalg's BLAS module, which
    imports all of scipy.linalg (0.2-0.4 s of CPU, measured; benchmarks/README.md) and starts
    scipy's own OpenBLAS threads, in every process that loads a kernel. No kernel here uses
    those two functions (a kernel that did would get numba's plain loop for them: numba keeps
    the answer for the process, which is why an untuned host keeps numba's own check), and
    ``np.dot`` inside a kernel still finds BLAS: numba's own check runs again, restored, when
    such a kernel compiles. The answer does not depend on whether scipy.linalg was imported
    before."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        import numba
        from numba.core.registry import cpu_target

        with blas_check_skipped() if TUNING.on else nullcontext():
            cpu_target.typing_context.refresh()
            cpu_target.target_context.refresh()
        if TUNING.on:
            gc.freeze()
    finally:
        if enabled:
            gc.enable()
    return numba


@contextmanager
def blas_check_skipped() -> Iterator[None]:
    """numba's ``ensure_blas`` raises ImportError inside (numba's own error for "no BLAS"),
    the function numba's array maths calls once, when the registries import it, to learn
    whether BLAS exists; numba's function is put back after. numba's import itself loads none
    of the array maths (``tests/test_startup_imports.py`` checks the answer comes out
    "none" and that the function is numba's again)."""
    from numba.np import linalg

    check = linalg.ensure_blas

    def no_blas() -> None:
        raise ImportError("BLAS check skipped while numba's registries load")

    linalg.ensure_blas = no_blas
    try:
        yield
    finally:
        linalg.ensure_blas = check


@contextmanager
def long_lived_run() -> Iterator[None]:
    """A training run's span. In a tuned process (:func:`tune_process`): what exists on entry
    frozen (it lives for the whole run, so the collector's full passes need not walk it),
    young collections every :data:`YOUNG_COLLECTION` allocations unless automatic collection
    is off (a threshold of 0). Both are undone on the way out: the whole frozen generation
    thaws, what was frozen before too (numba's registries), so the run's elaborated objects
    can be collected. Otherwise the collector is left alone."""
    if not TUNING.on:
        yield
        return
    threshold = gc.get_threshold()
    gc.freeze()
    if threshold[0]:
        gc.set_threshold(max(threshold[0], YOUNG_COLLECTION), *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


@cache
def reuse_heap() -> bool:
    """Have glibc serve allocations up to :data:`HEAP_ALLOCATION_MAX` from its heap, and keep
    up to :data:`HEAP_KEEP` of freed heap, once per process; False where the C library has no
    ``mallopt`` (not glibc), which changes nothing else. Process tuning
    (:func:`tune_process`), never a library call.

    A simulation's numpy temporaries of a few MiB are otherwise fresh mappings each time
    (glibc maps anything above a threshold that only rises as such mappings are freed, so the
    cost depends on what ran before), and the kernel zeroes every page of a fresh mapping
    (figures in benchmarks/README.md). Results do not depend on where memory comes from.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, HEAP_ALLOCATION_MAX)
                and mallopt(M_TRIM_THRESHOLD, HEAP_KEEP))


def announce_first_compile(folder: Path, stamp: str) -> None:
    """One line to stderr when ``folder`` has no marker yet for the source files ``stamp``
    names (then writes the marker)."""
    marker = folder / f"{COMPILED_MARKER}-{stamp}"
    if marker.exists():
        return
    print(f"libra-des: compiling kernels once (about {FIRST_COMPILE_S} s); cached in {folder}",
          file=sys.stderr)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:  # an unwritable folder: numba itself warns and compiles in memory
        pass


@contextmanager
def blas_threads(command: str | None) -> Iterator[None]:
    """Run the body (a command's run) with one OpenBLAS thread if ``command`` is one of
    :data:`ONE_BLAS_THREAD` (each OpenBLAS reads the setting once, when it loads; where it is
    loaded already the setting changes nothing). The environment is restored afterwards, so
    that no process started later inherits the setting."""
    if command not in ONE_BLAS_THREAD or any(name in os.environ for name in BLAS_THREAD_VARIABLES):
        yield
        return
    os.environ[BLAS_THREAD_VARIABLES[0]] = "1"
    try:
        yield
    finally:
        os.environ.pop(BLAS_THREAD_VARIABLES[0], None)
