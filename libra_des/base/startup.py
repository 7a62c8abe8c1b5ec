"""Process start-up of a command: what its imports cost beyond the code they load.

Two costs of a fresh interpreter that a short command such as ``libra-des plan`` (about
0.4 s, most of it imports) feels, both measured on the 2-core development machine in fresh
processes run alternately (as ``benchmarks/startup.py`` does):

* **The garbage collector** walks the modules, classes and pydantic validators an import
  builds, in every full pass while they load and afterwards, though they live as long as
  the process. :func:`imports_frozen` pauses it over the imports and freezes what they built
  (``gc.freeze``) until the command ends: about 50 ms of CPU less (0.46 against 0.51-0.52 s
  for ``plan ... --windows 20``, medians of 11).
* **OpenBLAS's worker threads** (numpy's BLAS) spin-wait on the other cores for about 0.1 s
  of CPU after the library loads, whether or not any BLAS call follows (measured: a 0.5 s
  busy loop after ``import numpy`` costs 0.67 s of CPU, 0.54 s with one thread). On a busy
  machine that CPU is taken from the command itself: ``libra-des plan ... --windows 20``
  took 0.476 s of CPU (median of 11), 0.386 s with one thread. :func:`blas_threads` loads
  numpy with one BLAS thread for the commands of :data:`ONE_BLAS_THREAD`, which do no large
  linear algebra (``plan``'s BLAS calls are dot products over one packed sequence's sample
  lengths; ``tests/test_startup_imports.py`` checks its output equals a run with four
  threads).
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

#: Commands started with one OpenBLAS thread (no large linear algebra; see the docstring).
ONE_BLAS_THREAD = frozenset({"plan"})
#: The variables OpenBLAS reads its thread count from, in its order of precedence: a user's
#: own setting of any of them is left alone.
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


@contextmanager
def imports_frozen() -> Iterator[None]:
    """Run the body (a command's imports) with the garbage collector paused, then freeze what
    it built; the caller calls ``gc.unfreeze()`` when the command ends (re-enabling the
    collector without the freeze gives nothing back: its next full pass walks them all)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        gc.freeze()
    finally:
        if enabled:
            gc.enable()


@contextmanager
def blas_threads(command: str | None) -> Iterator[None]:
    """Run the body (a command's imports) with one OpenBLAS thread if ``command`` is one of
    :data:`ONE_BLAS_THREAD` and numpy is not loaded yet (OpenBLAS reads its settings once,
    when numpy loads it). The environment is restored afterwards, so that no process the
    command starts inherits the setting."""
    if (command not in ONE_BLAS_THREAD or "numpy" in sys.modules
            or any(name in os.environ for name in BLAS_THREAD_VARIABLES)):
        yield
        return
    os.environ[BLAS_THREAD_VARIABLES[0]] = "1"
    try:
        yield
    finally:
        os.environ.pop(BLAS_THREAD_VARIABLES[0], None)
