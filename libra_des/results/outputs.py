"""Output folders: defaults that never overwrite another scenario's results, no stale files.

``libra-des run a/exp.yaml`` and ``libra-des run b/exp.yaml`` both default to ``runs/exp``.
Each folder a command fills by default carries a marker file naming the scenario file that
owns it; a default folder owned by another scenario (or holding files without a marker) is
left alone and the run goes to ``runs/exp-<hash of the scenario path>`` instead, with a
note. An explicit ``--out`` is the user's choice and is used as given.

A rerun removes the artefacts it knows and did not rewrite (``trace.json`` of an earlier
``--trace`` run), so a folder never mixes two runs.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from libra_des.base.storage import write_atomic

MARKER = ".libra-des-source"
#: Files a command may write into its folder besides its main result (removed when stale).
OPTIONAL_ARTEFACTS = ("trace.json",)


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


def remove_stale(folder: Path, written: set[str]) -> None:
    """Delete the optional artefacts of an earlier run that this run did not rewrite."""
    for name in OPTIONAL_ARTEFACTS:
        if name not in written:
            (folder / name).unlink(missing_ok=True)
