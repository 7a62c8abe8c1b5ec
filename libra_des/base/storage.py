"""Result files: canonical JSON and atomic writes (no half-written output survives).

Lives low in the package so that every layer (profiles, runs, sweeps) can persist data.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def dumps(obj: Any) -> str:
    """Canonical JSON (sorted keys) so equal results are byte-identical."""
    return json.dumps(obj, sort_keys=True, indent=2, allow_nan=False)


def write_atomic(path: Path, text: str) -> None:
    """Write through a temporary file and rename, so no half-written output survives."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        # mkstemp creates 0600 files; results are meant to be shared like any other output.
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
