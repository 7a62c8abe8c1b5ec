"""Result files: canonical JSON and atomic writes (no half-written output survives).

Lives low in the package so that every layer (profiles, runs, sweeps) can persist data.
Every file written here is recorded in its folder's manifest (:mod:`.ownership`), which is
what later lets a rerun replace it, and nothing the tool did not write.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from libra_des.base.ownership import record_write


def dumps(obj: Any) -> str:
    """Canonical JSON (sorted keys) so equal results are byte-identical."""
    return json.dumps(obj, sort_keys=True, indent=2, allow_nan=False)


def write_atomic(path: Path, text: str | bytes) -> None:
    """Write through a temporary file and rename, and record the file as the tool's own."""
    record_write(path, text)
