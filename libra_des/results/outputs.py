"""Output folders: defaults that never overwrite another scenario's results, no stale files.

``libra-des run a/exp.yaml`` and ``libra-des run b/exp.yaml`` both default to ``runs/exp``.
Each folder a command fills by default carries a marker file naming the scenario file that
owns it; a default folder owned by another scenario (or holding files without a marker) is
left alone and the run goes to ``runs/exp-<hash of the scenario path>`` instead, with a
note. An explicit ``--out`` is the user's choice and is used as given.

A run records the files it wrote in ``run.json`` (with its wall-clock time and host), and
every file it writes in the folder's manifest (:mod:`libra_des.base.ownership`, the one
output-folder policy). A rerun removes the files an earlier run recorded there and this one
did not rewrite (``trace.json`` of an earlier ``--trace`` run), so a folder never mixes two
runs; and it never deletes or overwrites a file the manifest does not vouch for unchanged
(a ``trace.json`` of the user's own, a ``run.json`` the user edited), refusing before any
work (:func:`check_ours`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from libra_des.base import ownership
from libra_des.base.storage import write_atomic

MARKER = ".libra-des-source"
#: The record of a run beside its ``result.json``: wall-clock time, host, files written.
RUN_RECORD = "run.json"


def owner(folder: Path) -> str | None:
    """The scenario path that owns ``folder``; None when free (absent or empty);
    ``"?"`` when it holds files but no marker the folder's manifest vouches for."""
    if not folder.is_dir():
        return None
    marker = folder / MARKER
    mine = ownership.load(folder) or {}
    if mine.get(MARKER) is not None and ownership.file_digest(marker) == mine[MARKER]:
        return marker.read_text().strip() or "?"
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
    """The files ``folder/run.json`` says an earlier run wrote (None: no record the folder's
    manifest vouches for unchanged: a hand-written or edited ``run.json`` is not trusted)."""
    path = folder / RUN_RECORD
    mine = ownership.load(folder) or {}
    if mine.get(RUN_RECORD) is None or ownership.file_digest(path) != mine[RUN_RECORD]:
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list):
        return None
    return {f for f in files if isinstance(f, str) and "/" not in f}


def check_ours(folder: Path, files: tuple[str, ...], flag: str) -> None:
    """Refuse, before any work, a folder where this run would overwrite or remove a file
    (one of ``files``, ``run.json``, the marker, an earlier run's stale outputs) that the
    folder's manifest does not record unchanged."""
    stale = tuple(sorted(recorded(folder) or ()))
    ownership.check_folder(folder, flag, (*files, RUN_RECORD, MARKER, *stale))


def remove_stale(folder: Path, written: set[str]) -> None:
    """Delete the artefacts an earlier run recorded that this run did not rewrite."""
    ledger = ownership.Ledger(folder)
    for name in sorted((recorded(folder) or set()) - written - {RUN_RECORD}):
        ledger.remove(name)
    ledger.save()


def check_report_path(path: Path, flag: str = "--out") -> None:
    """Refuse, before any work, an HTML output path holding a file no report wrote (a
    sweep's own ``sweep.csv``, a result, the user's page): it must be new, or a file its
    folder's manifest records unchanged."""
    ownership.check_file(path, flag)
