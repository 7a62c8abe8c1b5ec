"""Process safety for sweeps: one writer per folder, workers that die with their driver.

* :func:`folder_lock`: an exclusive ``flock`` on ``OUT/.lock`` held for the whole sweep, so a
  second sweep into the same folder is refused at once (one line) instead of running the
  shared points again and replacing the first sweep's index. The kernel drops the lock when
  the holder dies, so a killed sweep never leaves a stale lock.
* :func:`worker_init`: run in every pool worker; ignores SIGINT (the driver decides what a
  Ctrl-C means) and starts a watchdog that ends the worker within :data:`WATCH_S` seconds of
  its driver's death (the parent pid changes when a process is orphaned).
* :func:`sigterm_as_interrupt`: SIGTERM on the driver means what Ctrl-C means.
* :func:`stop_workers`: terminate a pool's workers at once (Ctrl-C must not wait for points
  that take minutes); finished points are already on disk.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from libra_des.base import ownership
from libra_des.base.ownership import Ledger
from libra_des.config.validation import check_output_dir
from libra_des.errors import InputError

#: How often a worker checks that its driver is alive (seconds): our choice, well under the
#: 2 s a user waits for Ctrl-C.
WATCH_S = 0.5
LOCK_NAME = ".lock"
#: Most grid points in one sweep (each is resolved and validated before any work): our choice.
MAX_POINTS = 10_000
#: Most local worker processes: our choice (beyond this, use --ray).
MAX_WORKERS = 256


@contextlib.contextmanager
def folder_lock(out: Path) -> Iterator[None]:
    """Hold ``OUT/.lock`` exclusively; a folder another live sweep holds is an input error."""
    import fcntl

    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise busy(out) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        ledger = Ledger(out)  # the lock is one of the folder's own files (ownership.py)
        ledger.record(LOCK_NAME)
        ledger.save()
        yield
    finally:
        os.close(fd)  # closing drops the lock


def _watch(parent: int) -> None:
    while True:
        time.sleep(WATCH_S)
        if os.getppid() != parent:
            os._exit(1)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (``kill``, a batch scheduler's stop) handled as Ctrl-C while a sweep runs:
    the workers stop, finished points are kept, exit 130."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def worker_init(parent: int) -> None:
    """Pool-worker initializer: ignore Ctrl-C, exit soon after the driver dies; SIGTERM
    ends a worker at once (a forked worker would otherwise inherit the driver's handler).
    The worker is the sweep's own process, tuned as a command's (``startup.tune_process``)."""
    from libra_des.base.startup import tune_process

    tune_process()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    threading.Thread(target=_watch, args=(parent,), daemon=True, name="driver-watch").start()


def stop_workers(pool: ProcessPoolExecutor) -> None:
    """Terminate the pool's worker processes now and shut it down without waiting."""
    processes = getattr(pool, "_processes", None) or {}
    for proc in list(processes.values()):
        with contextlib.suppress(Exception):
            proc.terminate()
    pool.shutdown(wait=False, cancel_futures=True)


#: What a sweep writes at the top of its folder (sweep.parquet with the ``tables`` extra).
TOP_FILES = ("sweep.json", "sweep.csv", "sweep.parquet", LOCK_NAME)


def check_folder(out: Path) -> None:
    """Refuse, before any work, a sweep folder that is not new, empty or the tool's own, or
    whose top files (the lock, ``sweep.csv``...) are not the tool's unchanged or are folders."""
    check_output_dir(out, "--out", TOP_FILES)
    for sub in ("indexes", "points", "trace-cache"):
        if (out / sub).exists() and not (out / sub).is_dir():
            raise InputError("--out", str(out / sub), "a folder (this path is a file)")


def check_parts(out: Path, point_ids: Sequence[str]) -> None:
    """The points and indexes subfolders, checked like the top: a point file that is a
    folder or one the tool did not write is refused before any point runs (and before the
    lock is taken, so a refusal changes nothing). A sweep still writing them (its latest
    point files not yet in the manifest) is named as such, not mistaken for a stranger."""
    try:
        ownership.check_folder(out / "points", "--out", [f"{i}.json" for i in point_ids])
        ownership.check_folder(out / "indexes", "--out", (), ("*.json",))
    except InputError:
        if lock_held(out):
            raise busy(out) from None
        raise


def lock_held(out: Path) -> bool:
    """Whether a live sweep holds ``OUT/.lock`` (probed without creating or writing it)."""
    import fcntl

    try:
        fd = os.open(out / LOCK_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def busy(out: Path) -> InputError:
    return InputError("--out", str(out), "a folder no other running sweep is writing to "
                      "(wait for it, or choose another --out)")


def check_points(count: int) -> None:
    if count > MAX_POINTS:
        raise InputError("--grid/--zip", f"{count:,} points",
                         f"<= {MAX_POINTS:,} points per sweep (split it into several sweeps)")
