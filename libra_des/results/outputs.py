"""Output folders: defaults that never overwrite another scenario's results, no stale files.

``libra-des run a/exp.yaml`` and ``libra-des run b/exp.yaml`` both default to ``runs/exp``.
Each folder a command fills by default carries a marker file naming the scenario file that
owns it; a default folder owned by another scenario (or holding files without a marker) is
left alone and the run goes to ``runs/exp-<hash of the scenario path>`` instead, with a
note. An explicit ``--out`` is the user's choice and is used as given.

A run records the files it wrote in ``run.json`` (with its wall-clock time and host). A rerun
removes the files an earlier run recorded there and this one did not rewrite (``trace.json``
of an earlier ``--trace`` run), so a folder never mixes two runs; and it never deletes or
overwrites a file no run recorded (a ``trace.json`` of the user's own in ``--out .`` is
refused before any work: :func:`check_ours`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from libra_des.base.storage import write_atomic
from libra_des.errors import InputError

MARKER = ".libra-des-source"
#: The record of a run beside its ``result.json``: wall-clock time, host, files written.
RUN_RECORD = "run.json"


def owner(folder: Path) -> str | None:
    """The scenario path that owns ``folder``; None when free (absent or empty);
    ``"?"`` when it holds files but no marker (owner unknown)."""
    if not folder.is_dir():
        return None
    marker = folder / MARKER
    if marker.is_file():
        try:
            return marker.read_text().strip() or "?"
        except (OSError, UnicodeDecodeError):
            return "?"
    return "?" if any(folder.iterdir()) else None


def default_folder(scenario_path: str, prefix: str = "", root: Path = Path("runs")) -> Path:
    """``runs/<prefix><stem>``, or ``...-<hash>`` when another scenario owns that name."""
    source = str(Path(scenario_path).resolve())
    stem = Path(scenario_path).stem
    plain = root / f"{prefix}{stem}"
    if owner(plain) in (None, source):
        return plain
    digest = hashlib.sha256(source.encode()).hexdigest()[:8]
    return root / f"{prefix}{stem}-{digest}"


def claim(folder: Path, scenario_path: str) -> None:
    """Mark ``folder`` as holding the results of ``scenario_path``."""
    write_atomic(folder / MARKER, str(Path(scenario_path).resolve()) + "\n")


def recorded(folder: Path) -> set[str] | None:
    """The files ``folder/run.json`` says an earlier run wrote (None: no readable record)."""
    try:
        data = json.loads((folder / RUN_RECORD).read_text())
    except (OSError, ValueError):
        return None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list):
        return None
    return {f for f in files if isinstance(f, str) and "/" not in f}


def check_ours(folder: Path, files: tuple[str, ...], flag: str) -> None:
    """Refuse, before any work, a folder where this run would overwrite a file (one of
    ``files`` or ``run.json``) that no earlier run recorded as its own."""
    ours = recorded(folder)
    allowed = set() if ours is None else {*ours, RUN_RECORD}
    for name in (*files, RUN_RECORD):
        path = folder / name
        if (path.exists() or path.is_symlink()) and name not in allowed:
            raise InputError(flag, str(path), "a folder whose result files an earlier run "
                             "wrote (this file is not one: move it, or choose another --out)")


def remove_stale(folder: Path, written: set[str]) -> None:
    """Delete the artefacts an earlier run recorded that this run did not rewrite."""
    for name in sorted((recorded(folder) or set()) - written - {RUN_RECORD}):
        (folder / name).unlink(missing_ok=True)


#: How every page ``libra-des report`` writes begins (report.render): an existing file that
#: begins otherwise is not one a report wrote, so it is never overwritten.
REPORT_HEAD = b"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>libra-des report:"


def check_report_path(path: Path, flag: str = "--out") -> None:
    """Refuse, before any work, an HTML output path holding a file no report wrote (a
    sweep's own ``sweep.csv``, a result, the user's page)."""
    if not (path.exists() or path.is_symlink()):
        return
    try:
        with path.open("rb") as fh:
            head = fh.read(len(REPORT_HEAD))
    except OSError:
        head = b""
    if head != REPORT_HEAD:
        raise InputError(flag, str(path), "a new file or a report libra-des wrote (this "
                         "file is not one: choose another --out)")
