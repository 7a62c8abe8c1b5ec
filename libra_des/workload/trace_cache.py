"""On-disk cache of generated MoE routing traces, keyed by content.

Every policy of a study (a sweep, a figure, a series of ``libra-des run``) sees the same
generated routing for a given (seed, model, workload): the trace generator draws from its own
child stream, before and independently of any policy decision. Generating it is most of a
short MoE run, so the batches are stored once and read back by every later run.

The key is a SHA-256 over everything the traces can depend on: the generator's stream state at
the start, the model and workload sections of the scenario (more than the generator reads:
over-keying only costs sharing, never correctness), and the source of the modules that
generate traces, so that a change of the generator invalidates old files. Files are written
atomically (temporary file, then rename), so parallel sweep workers may race safely.

Where: the directory named by the environment variable ``LIBRA_DES_TRACE_CACHE``; unset or
empty means no cache (our choice: nothing is written outside the run folders unless asked;
``sweep`` turns it on in ``OUT/trace-cache`` for its local workers).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from libra_des.workload.routing import RoutingTrace

ENV = "LIBRA_DES_TRACE_CACHE"


def cache_dir(environ: Mapping[str, str] | None = None) -> Path | None:
    """The cache directory named by ``LIBRA_DES_TRACE_CACHE`` (None: caching off)."""
    value = (os.environ if environ is None else environ).get(ENV, "")
    return Path(value) if value else None


@contextmanager
def enabled(directory: Path) -> Iterator[None]:
    """Cache in ``directory`` for the duration (processes started meanwhile inherit it),
    unless ``LIBRA_DES_TRACE_CACHE`` already names one."""
    if cache_dir() is not None:
        yield
        return
    os.environ[ENV] = str(directory)
    try:
        yield
    finally:
        os.environ.pop(ENV, None)


def source_fingerprint(modules: Iterable[ModuleType]) -> str:
    """SHA-256 of the modules' source files (the caller names those that generate traces)."""
    digest = hashlib.sha256()
    for module in modules:
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()


def trace_key(rng: np.random.Generator, parts: Mapping[str, Any]) -> str:
    """Content key of the traces ``rng`` (at this state) would generate for ``parts``
    (which include the generating code's fingerprint)."""
    blob = json.dumps(
        {"rng": rng.bit_generator.state, "parts": parts},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def save(path: Path, traces: Sequence[RoutingTrace]) -> None:
    """Write the batches into one ``.npz`` (uncompressed: expert ids barely compress)."""
    arrays: dict[str, Any] = {"batches": np.array(len(traces))}
    for b, t in enumerate(traces):
        arrays[f"by_layer{b}"] = t.by_layer
        arrays[f"request{b}"] = t.request
        arrays[f"dataset{b}"] = t.dataset
        arrays[f"num_experts{b}"] = np.array(t.num_experts)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            np.savez(handle, **arrays)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load(path: Path) -> list[RoutingTrace] | None:
    """The batches stored at ``path``, or None when absent or unreadable (then regenerated)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            return [
                RoutingTrace.of_layers(data[f"by_layer{b}"], data[f"request{b}"],
                                       data[f"dataset{b}"], int(data[f"num_experts{b}"]))
                for b in range(int(data["batches"]))
            ]
    except (OSError, KeyError, ValueError, EOFError):
        return None


def cached_traces(
    directory: Path,
    rng: np.random.Generator,
    parts: Mapping[str, Any],
    make: Callable[[], list[RoutingTrace]],
) -> list[RoutingTrace]:
    """The traces for (``rng`` state, ``parts``): read from ``directory`` or made and stored.

    ``make`` must draw from its own copy of ``rng``: the caller's stream is left untouched
    either way, so results do not depend on whether the cache hit.
    """
    path = directory / f"{trace_key(rng, parts)}.npz"
    found = load(path)
    if found is not None:
        return found
    traces = make()
    save(path, traces)
    return traces
