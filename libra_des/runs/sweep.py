"""Parameter sweeps: a grid of scenario overrides, run in parallel, resumable, atomic.

A sweep is one base scenario plus ``--set`` overrides and a list of *axes*:

* a grid axis ``KEY=V1,V2,...`` takes each value in turn;
* a zip axis ``K1=A1,A2;K2=B1,B2`` moves several keys together (``dp`` with ``pool_size``).

Points are the cartesian product of the axes, the first axis outermost. Each point is
resolved into a validated scenario *before* any simulation starts, so bad input costs nothing.

Storage contract (``OUT``):

* ``OUT/points/<id>.json``: one point's ``result.json``; ``id`` is a hash of the resolved
  scenario's contents and the code fingerprint (:mod:`libra_des.base.identity`), so a rerun
  finds finished points and skips them (resume), a code edit recomputes them, and two grid
  points that resolve to the same scenario run once;
* ``OUT/sweep.json``: the index, points in expansion order with their overrides, axis
  coordinates and headline metrics. Everything except ``wall_s`` is a function of the command;
* ``OUT/sweep.csv`` (and ``sweep.parquet`` with the ``tables`` extra): one row per point, every
  override and scalar metric (:mod:`libra_des.results.tables`).

Both are written atomically by the driver process (workers only return results), so a killed
sweep leaves whole files only, and a Ray cluster needs no shared filesystem.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import libra_des.kinds as kinds
from libra_des.base.version import __version__
from libra_des.config import Scenario, load_scenario, parse_override, scenario_dict
from libra_des.errors import InputError
from libra_des.base.identity import code_fingerprint, content_key, portable_path
from libra_des.kinds import moe as moe_kind
from libra_des.kinds import training as training_kind
from libra_des.kinds.simulation import simulate_timed
from libra_des.base.storage import dumps, write_atomic
from libra_des.base.ownership import Ledger
from libra_des.runs.sweep_safety import (
    check_folder,
    check_parts,
    check_points,
    folder_lock,
    stop_workers,
    worker_init,
)
from libra_des.results.tables import write_sweep_table
from libra_des.workload import trace_cache

#: Headline metrics copied into the index, as dotted paths into ``result.json`` (each kind
#: declares its own: :mod:`libra_des.kinds`).
TRAINING_METRICS = training_kind.METRICS
MOE_METRICS = moe_kind.METRICS
BRACKETS = {"[": "]", "{": "}", "(": ")"}


# ----------------------------------------------------------------------------- axes


@dataclass(frozen=True)
class Axis:
    """Keys that move together; ``values[i]`` holds one raw (YAML) text per key."""

    keys: tuple[str, ...]
    values: tuple[tuple[str, ...], ...]

    def settings(self, i: int) -> tuple[str, ...]:
        """The ``key=value`` overrides of this axis at coordinate ``i``."""
        return tuple(f"{k}={v}" for k, v in zip(self.keys, self.values[i], strict=True))

    def as_dict(self) -> dict[str, Any]:
        return {"keys": list(self.keys), "values": [list(v) for v in self.values]}


def split_values(text: str) -> list[str]:
    """Split ``a,[1,2],{x: 3}`` at top-level commas (brackets and quotes protect commas)."""
    items, depth, quote, start = [], [], "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in BRACKETS:
            depth.append(BRACKETS[ch])
        elif depth and ch == depth[-1]:
            depth.pop()
        elif ch == "," and not depth:
            items.append(text[start:i].strip())
            start = i + 1
    items.append(text[start:].strip())
    return items


def parse_assignment(flag: str, text: str) -> tuple[str, list[str]]:
    """``KEY=V1,V2`` -> (KEY, [V1, V2]); the key follows the ``--set`` rules."""
    key, sep, values = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise InputError(flag, text, "dotted.key=V1,V2,...")
    items = split_values(values)
    if any(not v for v in items):
        raise InputError(flag, text, "dotted.key=V1,V2,... with no empty value")
    return key, items


def parse_axis(text: str, zipped: bool = False) -> Axis:
    """One ``--grid KEY=V1,V2`` or ``--zip K1=A,B;K2=C,D`` argument."""
    flag = "--zip" if zipped else "--grid"
    parts = [p for p in text.split(";") if p.strip()] if zipped else [text]
    if not parts:
        raise InputError(flag, text, "K1=A,B;K2=C,D")
    pairs = [parse_assignment(flag, part) for part in parts]
    lengths = {len(values) for _, values in pairs}
    if len(lengths) != 1:
        got = " and ".join(str(len(v)) for _, v in pairs)
        raise InputError(flag, text, f"value lists of equal length (got {got})")
    keys = tuple(k for k, _ in pairs)
    if len(set(keys)) != len(keys):
        raise InputError(flag, text, "each key once per axis")
    return Axis(keys, tuple(zip(*(v for _, v in pairs), strict=True)))


def check_axes(axes: Sequence[Axis]) -> None:
    """A key may belong to one axis only (otherwise the later axis silently wins)."""
    seen: set[str] = set()
    for axis in axes:
        for key in axis.keys:
            if key in seen:
                raise InputError("--grid/--zip", key, "each key in one axis only")
            seen.add(key)


def check_base(base: Sequence[str], axes: Sequence[Axis]) -> None:
    """A ``--set`` key no axis sets too (nor a section holding it, nor a key inside it): the
    axis, applied later, would silently replace the ``--set`` value at every point."""
    for text in base:
        key = text.split("=", 1)[0].strip()
        for axis in axes:
            for other in axis.keys:
                if key == other or other.startswith(key + ".") or key.startswith(other + "."):
                    raise InputError("--set", key, f"a key no --grid/--zip axis sets (the axis "
                                     f"on {other} would replace it at every point)")


def expand(axes: Sequence[Axis]) -> list[tuple[tuple[int, ...], tuple[str, ...]]]:
    """Cartesian product of the axes: (coordinates, overrides) per point, first axis outermost."""
    out = []
    for coords in itertools.product(*(range(len(a.values)) for a in axes)):
        sets = tuple(s for axis, i in zip(axes, coords, strict=True) for s in axis.settings(i))
        out.append((coords, sets))
    return out


# ----------------------------------------------------------------------------- points


@dataclass(frozen=True)
class Point:
    """One resolved grid point."""

    coords: tuple[int, ...]
    overrides: tuple[str, ...]
    scenario: Scenario
    id: str

    def override_values(self) -> dict[str, Any]:
        """The axis overrides as ``{dotted.key: parsed value}``."""
        return {".".join(k): v for k, v in map(parse_override, self.overrides)}


@dataclass(frozen=True)
class SweepSpec:
    """Everything that defines a sweep's points."""

    scenario: str
    base: tuple[str, ...] = ()
    axes: tuple[Axis, ...] = ()


def point_id(scenario: Scenario) -> str:
    """Stable hash of the resolved scenario's *contents* and of the code that simulates it.

    Files the scenario names enter by content, not path, so two clones agree; the code
    fingerprint changes with any source edit, so a resumed sweep recomputes stale points.
    """
    key = content_key(scenario.model_dump(mode="json"))
    blob = dumps({"scenario": key, "libra_des": __version__, "code": code_fingerprint()})
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def resolve(spec: SweepSpec) -> list[Point]:
    """Validate every point (each raises the scenario's own one-line error) before any work."""
    check_axes(spec.axes)
    check_base(spec.base, spec.axes)
    check_points(math.prod(len(a.values) for a in spec.axes))
    points = []
    for coords, sets in expand(spec.axes):
        scenario = load_scenario(spec.scenario, [*spec.base, *sets])
        scenario = kinds.elaborated(scenario)
        points.append(Point(coords, sets, scenario, point_id(scenario)))
    return points


def headline(result: Mapping[str, Any]) -> dict[str, float]:
    """The index's metrics: numeric values at the dotted paths for the result's kind."""
    keys = kinds.of_result(result).metrics
    out = {}
    for key in keys:
        node: Any = result
        for part in key.split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        if isinstance(node, int | float) and not isinstance(node, bool):
            out[key] = float(node)
    return out


# ----------------------------------------------------------------------------- execution


@dataclass(frozen=True)
class Outcome:
    """What a worker hands back: the canonical JSON text of a result, or a one-line failure.

    Text rather than exceptions or dicts: exceptions with extra constructor arguments do not
    survive pickling, and serialising in the worker catches unserialisable results early.
    """

    text: str | None
    error: str = ""
    input_error: tuple[str, str, str] | None = None
    #: The point's wall-clock seconds (the index's ``wall_s``; never in the point's file).
    wall_s: float = 0.0


def run_point(scenario: Scenario) -> Outcome:
    """Simulate one resolved (elaborated) point (runs in a worker process, a Ray task or
    in-process)."""
    try:
        # Every point was elaborated when the sweep was resolved (:func:`resolve`).
        result, _, timing = simulate_timed(scenario, elaborated=True)
        return Outcome(dumps(result) + "\n", wall_s=float(timing.get("wall_s", 0.0)))
    except InputError as exc:
        return Outcome(None, exc.line(), (exc.field, str(exc.value), exc.allowed))
    except Exception as exc:  # a failed point must not lose the rest of the sweep
        return Outcome(None, f"{type(exc).__name__}: {exc}")


#: Runs the given scenarios, yielding (position, outcome) as each finishes.
Executor = Callable[[Sequence[Scenario]], Iterator[tuple[int, Outcome]]]


def default_workers() -> int:
    return min(2, os.cpu_count() or 1)


def local_executor(workers: int) -> Executor:
    """In-process for one worker, else a spawn-context process pool (no forked threads)."""

    def run(scenarios: Sequence[Scenario]) -> Iterator[tuple[int, Outcome]]:
        if workers == 1 or len(scenarios) <= 1:
            for i, sc in enumerate(scenarios):
                yield i, run_point(sc)
            return
        size = min(workers, len(scenarios))
        pool = ProcessPoolExecutor(size, mp_context=get_context("spawn"),
                                   initializer=worker_init, initargs=(os.getpid(),))
        pending: dict[Future[Outcome], int] = {
            pool.submit(run_point, sc): i for i, sc in enumerate(scenarios)
        }
        try:
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    yield pending.pop(fut), fut.result()
        except BaseException:
            stop_workers(pool)  # Ctrl-C or a lost worker: do not wait for running points
            raise
        pool.shutdown(wait=True)

    return run


def ray_executor() -> Executor:
    """Ray tasks (one CPU each) on the cluster ``ray.init()`` finds; a one-line error if absent."""
    try:
        import ray
    except ImportError:
        raise InputError("--ray", "ray", "ray installed (pip install 'libra-des[ray]')") from None

    def run(scenarios: Sequence[Scenario]) -> Iterator[tuple[int, Outcome]]:
        if not ray.is_initialized():
            ray.init(ignore_reinit_error=True, log_to_driver=False)
        task = ray.remote(num_cpus=1)(run_point)
        pending = {task.remote(sc): i for i, sc in enumerate(scenarios)}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                yield pending.pop(ref), ray.get(ref)

    return run


# ----------------------------------------------------------------------------- the sweep


@dataclass(frozen=True)
class PointRecord:
    """One point as the index lists it."""

    point: Point
    metrics: dict[str, float]
    wall_s: float
    reused: bool
    path: Path
    error: str = ""

    def result(self) -> dict[str, Any]:
        """The point's full ``result.json``."""
        data: dict[str, Any] = json.loads(self.path.read_text())
        return data

    def index_entry(self) -> dict[str, Any]:
        entry = {
            "id": self.point.id,
            "coords": list(self.point.coords),
            "overrides": self.point.override_values(),
            "file": f"points/{self.point.id}.json",
            "metrics": self.metrics,
            "wall_s": self.wall_s,
        }
        if self.error:
            entry["error"] = self.error
        return entry


@dataclass(frozen=True)
class SweepResult:
    """The outcome of :func:`run_sweep`."""

    spec: SweepSpec
    out: Path
    records: tuple[PointRecord, ...]
    ran: int
    reused: int
    failed: tuple[PointRecord, ...] = ()
    input_error: InputError | None = None

    def index(self) -> dict[str, Any]:
        return {
            "scenario": portable_path(self.spec.scenario),
            "set": list(self.spec.base),
            "axes": [a.as_dict() for a in self.spec.axes],
            "libra_des": __version__,
            "code": code_fingerprint(),
            "points": [r.index_entry() for r in self.records],
        }


#: Point files written between two saves of their manifest: a sweep killed outright (no
#: Ctrl-C) leaves at most this many unrecorded, which a rerun then refuses (our choice).
SAVE_EVERY = 16


def load_finished(path: Path, scenario: Scenario) -> dict[str, Any] | None:
    """A stored result for exactly this scenario, or None (missing, unreadable, other run)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("scenario") != scenario_dict(scenario):
        return None
    return data


def run_sweep(
    spec: SweepSpec,
    out: Path,
    executor: Executor | None = None,
    advance: Callable[[int], None] = lambda _n: None,
    points: Sequence[Point] | None = None,
) -> SweepResult:
    """Resolve, skip finished points, run the rest, write point files and ``sweep.json``.

    ``advance(n)`` is called as points finish (also once for the reused ones), for progress.
    """
    points = list(points) if points is not None else resolve(spec)
    run = executor or local_executor(default_workers())
    check_folder(out)  # before any work (libra_des.base.ownership)
    check_parts(out, list(dict.fromkeys(p.id for p in points)))
    with folder_lock(out):
        return run_locked(spec, out, run, advance, points)


def run_locked(
    spec: SweepSpec,
    out: Path,
    run: Executor,
    advance: Callable[[int], None],
    points: list[Point],
) -> SweepResult:
    """:func:`run_sweep`'s work, while this process holds the folder's lock."""
    unique = {p.id: p for p in points}
    found = {i: load_finished(out / "points" / f"{i}.json", p.scenario) for i, p in unique.items()}
    todo = [p for i, p in unique.items() if found[i] is None]
    todo_ids = {p.id for p in todo}
    advance(len(unique) - len(todo))
    errors: dict[str, Outcome] = {}
    walls: dict[str, float] = {}
    ledger = Ledger(out / "points")  # the point files' manifest, saved in batches
    try:
        with trace_cache.enabled(out / "trace-cache"):  # MoE points share routing traces
            for pos, outcome in run([p.scenario for p in todo]):
                pid = todo[pos].id
                if outcome.text is None:
                    errors[pid] = outcome
                else:
                    ledger.write(f"{pid}.json", outcome.text)
                    found[pid] = json.loads(outcome.text)
                    walls[pid] = outcome.wall_s
                    if len(ledger.changed) >= SAVE_EVERY:
                        ledger.save()
                advance(1)
    finally:
        ledger.save()  # finished points stay the sweep's own after a Ctrl-C too
    records = tuple(record(p, found[p.id], errors.get(p.id), out, p.id not in todo_ids,
                           walls.get(p.id, 0.0)) for p in points)
    first = next((o.input_error for o in errors.values() if o.input_error), None)
    result = SweepResult(
        spec, out, records, ran=len(todo) - len(errors), reused=len(unique) - len(todo),
        failed=tuple(r for r in records if r.error),
        input_error=InputError(*first) if first else None,
    )
    index = dumps(result.index()) + "\n"
    write_atomic(out / "sweep.json", index)
    # One index per distinct sweep command too, so a later sweep into the folder with other
    # axes never loses this one's index (sweep.json is always the latest).
    spec_id = hashlib.sha256(dumps(result.index() | {"points": []}).encode()).hexdigest()[:16]
    write_atomic(out / "indexes" / f"{spec_id}.json", index)
    write_sweep_table(out)  # sweep.csv (+ sweep.parquet with the tables extra)
    return result


def record(
    p: Point, result: dict[str, Any] | None, failure: Outcome | None, out: Path, reused: bool,
    wall_s: float = 0.0,
) -> PointRecord:
    """A point's index entry; ``wall_s`` is this sweep's time on it (0 for a reused point)."""
    path = out / "points" / f"{p.id}.json"
    if result is None:
        return PointRecord(p, {}, 0.0, reused, path, failure.error if failure else "not run")
    return PointRecord(p, headline(result), wall_s, reused, path)


def timed_sweep(spec: SweepSpec, out: Path, workers: int) -> tuple[SweepResult, float]:
    """Convenience for scripts: a local sweep and its wall time, failures raised."""
    began = time.perf_counter()
    result = run_sweep(spec, out, local_executor(workers))
    if result.input_error is not None:
        raise result.input_error
    if result.failed:
        raise RuntimeError(f"sweep point failed: {result.failed[0].error}")
    return result, time.perf_counter() - began
