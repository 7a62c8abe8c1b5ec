"""Output files and folders, as every writing command treats them: JSON text, atomic writes,
writable and owned folders, a run folder's record of its files.

These come from the light modules that define them (no numpy, no simulator), so a command
that imports this module pays for nothing else; they are typed by their definitions.
"""

from __future__ import annotations

import os
from pathlib import Path

from libra_des.base.storage import dumps, write_atomic
from libra_des.config.validation import check_output_dir, check_output_file
from libra_des.errors import InputError
from libra_des.results.outputs import (
    RUN_RECORD,
    check_ours,
    check_report_path,
    claim,
    default_folder,
    remove_stale,
)

__all__ = [
    "RUN_RECORD", "check_ours", "check_output_dir", "check_output_file", "check_report_path",
    "claim", "default_folder", "dumps", "remove_stale", "write_atomic", "write_output",
]


def write_output(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write one output file atomically and record it in its folder's manifest, the proof
    that a later run may replace it (the output-folder policy, docs/user-guide.md). A file
    there that the manifest does not record unchanged is refused
    (:class:`~libra_des.errors.InputError`), never replaced."""
    import errno

    from libra_des.base.ownership import check_file

    if not isinstance(path, str | os.PathLike) or not isinstance(data, str | bytes):
        raise InputError("path", path, "a file path (str or os.PathLike) and str or bytes data")
    check_file(Path(path), "path")
    try:
        write_atomic(Path(path), data)
    except OSError as exc:
        why = errno.errorcode.get(exc.errno or 0, type(exc).__name__)
        raise InputError("path", str(path), f"a writable output path ({why})") from None
