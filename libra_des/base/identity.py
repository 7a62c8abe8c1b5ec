"""Reproducible identities: portable paths in result files, content hashes for sweep points.

* :func:`portable_paths` rewrites every absolute path inside a scenario dump so that result
  files never hold the checkout's location: a path inside the project becomes relative to the
  project root (``topologies/h200-roce-railopt.yaml``), any other path relative to the working
  directory. The loader finds project-relative paths again (``config.resolve_path`` tries
  ``ROOT / ref``), so a dump still loads.
* :func:`content_key` replaces each file a scenario names by the SHA-256 of its bytes, so two
  clones (different folders, same files) agree and an edited topology file changes the key.
* :func:`code_fingerprint` hashes the package's own sources and data files (the shipped GPU
  records) and the shipped calibration profiles, which the cost model reads, so a code edit
  invalidates stale sweep points; plotting sources (:data:`PLOTTING`) are left out, as they
  cannot change a result. User GPU records (the folders of :data:`GPU_RECORDS_ENV`) price
  a run as shipped ones do, so their files are hashed too (by file name: their folders'
  locations differ between machines).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

#: The project root: the folder that holds the package (and topologies/, workloads/, ...).
ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(__file__).resolve().parents[1]
#: Plotting code cannot change a result, so it stays out of the fingerprint: the report's
#: figures here (the paper figures, ``paper_figs/``, sit outside the package and are never
#: hashed).
PLOTTING = (PACKAGE / "report" / "figures.py",)
#: Data the simulator reads besides its code: the shipped calibration profiles (JSON) and
#: NCCL's tuning constants (calibration/public/nccl_tuning.yaml).
DATA_DIRS = (ROOT / "calibration" / "profiles",)
DATA_FILES = (ROOT / "calibration" / "public" / "nccl_tuning.yaml",)
#: Folders of user GPU records, ``os.pathsep``-separated (``hardware/gpu_records.py``).
GPU_RECORDS_ENV = "LIBRA_DES_GPU_RECORDS"


def map_strings(obj: Any, fn: Callable[[str], Any]) -> Any:
    """Apply ``fn`` to every string inside nested dicts/lists (keys stay as they are)."""
    if isinstance(obj, dict):
        return {k: map_strings(v, fn) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [map_strings(v, fn) for v in obj]
    return fn(obj) if isinstance(obj, str) else obj


def portable_path(text: str, root: Path = ROOT) -> str:
    """An absolute path made relative (to ``root`` when inside it, else to the cwd)."""
    if not os.path.isabs(text):
        return text
    path = Path(text)
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return Path(os.path.relpath(path, Path.cwd())).as_posix()


def portable_paths(data: Any, root: Path = ROOT) -> Any:
    """``data`` with every absolute path string made relative (see the module docstring)."""
    return map_strings(data, lambda s: portable_path(s, root))


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def content_of(text: str, root: Path = ROOT) -> Any:
    """A string that names an existing file becomes ``{"sha256": ...}`` of its bytes."""
    if "/" not in text and "." not in text:
        return text  # a plain name ("libra", "1f1b"), not a file
    for cand in (Path(text), root / text):
        if cand.is_file():
            return {"sha256": file_digest(cand)}
    return text


def content_key(data: Any, root: Path = ROOT) -> Any:
    """``data`` with every referenced file replaced by its content hash (paths drop out)."""
    return map_strings(data, lambda s: content_of(s, root))


def source_files(folder: Path, suffixes: tuple[str, ...]) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in suffixes
                  and "__pycache__" not in p.parts)


@cache
def code_fingerprint() -> str:
    """SHA-256 (16 hex digits) over the package sources and data, the shipped profiles (by
    relative path) and the user GPU records (by file name).

    Cached per process: sources do not change under a running simulation.
    """
    digest = hashlib.sha256()
    files = [p for p in source_files(PACKAGE, (".py", ".yaml")) if p not in PLOTTING]
    for folder in DATA_DIRS:
        if folder.is_dir():
            files += source_files(folder, (".json",))
    files += [f for f in DATA_FILES if f.is_file()]
    for path in files:
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    for named in os.environ.get(GPU_RECORDS_ENV, "").split(os.pathsep):
        for record in sorted(Path(named).glob("*.yaml")) if named else ():
            digest.update(record.name.encode() + b"\0" + record.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


#: Distributions whose versions define a result (the model's arithmetic and its inputs'
#: parsing), recorded in every ``result.json`` as ``versions``.
VERSIONED = ("libra-des", "numpy", "scipy", "simpy", "numba", "llvmlite", "networkx",
             "pydantic")


@cache
def versions() -> dict[str, str]:
    """What produced a result: Python and the :data:`VERSIONED` distributions as installed
    (``constraints.txt`` pins them; "not installed" for one that is missing)."""
    import platform
    from importlib import metadata

    found = {"python": platform.python_version()}
    for name in VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def host() -> dict[str, Any]:
    """Where a run ran (for ``run.json``, never ``result.json``: it differs between machines
    that give the same result)."""
    import platform

    return {"hostname": platform.node(), "platform": platform.platform(),
            "machine": platform.machine(), "cpus": os.cpu_count(),
            "python": platform.python_version()}
