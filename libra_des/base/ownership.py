"""Output folders the tool may write into, and the manifest that proves which files are its own.

The policy (docs/user-guide.md, "Output folders"), one for every writer (run, sweep, figs,
report, calibrate, profile, the Chakra export and the API functions that write):

* A folder is the tool's to fill when it is new (absent), empty, or holds a valid manifest
  (:data:`MANIFEST`): a folder holding anything else is not one the tool created, and is
  refused before any work starts.
* Inside such a folder a file the writer would replace or remove must be recorded in the
  manifest with the sha256 of its bytes at write time, and still hash to it: a file the
  user wrote, or a file of ours the user edited since, is refused (never overwritten).
  Files the writer does not touch (the user's notes beside the results) are left alone.
* A manifest is the tool's only if its own integrity digest (the sha256 of its file table)
  matches; a hand-written or edited one vouches for nothing.
* A single-file output (``report --out page.html``, ``profile --out p.json``) may go to a
  new path, or replace a file its folder's manifest records unchanged; the folder may hold
  anything else.
* FIFOs, sockets, devices and symbolic-link loops are refused as any input or output path
  (:func:`check_special`, by ``stat``; such a file is never opened, so nothing blocks).

Every write goes through a temporary file and a rename (no half-written output survives);
the manifest itself too. Writers in one folder from several processes serialise their
manifest updates with an advisory lock on the folder.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from libra_des.errors import InputError

#: The manifest of each folder the tool writes: {name: sha256 of its bytes at write time}.
MANIFEST = ".libra-des-manifest"
#: What every refusal of an output folder allows.
ALLOWED_FOLDER = "a folder the tool created or an empty/new one"
#: Largest manifest read (our bound: a 16,384-point sweep's points/ folder is ~1.5 MB).
MAX_MANIFEST_BYTES = 64 << 20
_KINDS = ((stat.S_ISFIFO, "a pipe"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))


def check_special(path: Path, field: str) -> None:
    """Refuse a FIFO, socket, device or symbolic-link loop at ``path`` (``stat`` only, so
    the file is never opened and nothing waits). A missing path passes (callers decide)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError(field, str(path), "a path without a symbolic-link loop") from None
        return
    except ValueError:  # an embedded NUL: the callers' own checks name it
        return
    for test, what in _KINDS:
        if test(mode):
            raise InputError(field, str(path), f"a regular file or folder (this is {what}; "
                             "it is never opened)")


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_digest(path: Path) -> str | None:
    """sha256 of a regular file's bytes; None for anything else or an unreadable file."""
    try:
        if path.is_symlink() or not path.is_file():
            return None
        return digest(path.read_bytes())
    except (OSError, ValueError):
        return None


def table_digest(files: dict[str, str]) -> str:
    return digest(json.dumps(files, sort_keys=True).encode())


def load(folder: Path) -> dict[str, str] | None:
    """The file table of ``folder``'s manifest; None when absent or not the tool's (its
    integrity digest fails, it is not a regular file, or not the manifest's shape)."""
    path = folder / MANIFEST
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_MANIFEST_BYTES:
            return None
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict) or not all(
        isinstance(k, str) and "/" not in k and isinstance(v, str) for k, v in files.items()
    ):
        return None
    if data.get("tool") != "libra-des" or data.get("sha256") != table_digest(files):
        return None
    return files


def replace(path: Path, data: bytes) -> None:
    """Write ``data`` through a temporary file in the same folder and a rename."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        # mkstemp creates 0600 files; results are meant to be shared like any other output.
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def folder_locked(folder: Path) -> Iterator[None]:
    """Hold an advisory lock on ``folder`` itself while its manifest is read and rewritten."""
    import fcntl

    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class Ledger:
    """The manifest of one folder while a writer fills it: :meth:`write` records each file's
    hash, :meth:`save` persists the table (batch many writes between saves)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.files: dict[str, str] = load(folder) or {}
        self.changed: dict[str, str | None] = {}

    def write(self, name: str, data: bytes | str) -> Path:
        raw = data.encode() if isinstance(data, str) else data
        path = self.folder / name
        replace(path, raw)
        self.files[name] = self.changed[name] = digest(raw)
        return path

    def record(self, name: str) -> None:
        """Record a file another library wrote into the folder (matplotlib's figures)."""
        found = file_digest(self.folder / name)
        if found is not None:
            self.files[name] = self.changed[name] = found

    def remove(self, name: str) -> None:
        """Delete an earlier output of ours, only while it is unchanged since we wrote it."""
        path = self.folder / name
        if self.files.get(name) is not None and file_digest(path) == self.files[name]:
            path.unlink(missing_ok=True)
        if name in self.files:
            self.files.pop(name)
            self.changed[name] = None

    def save(self) -> None:
        """Merge this writer's changes into the manifest on disk (under the folder's lock)."""
        if not self.changed:
            return
        with folder_locked(self.folder):
            files = load(self.folder) or {}
            for name, sha in self.changed.items():
                if sha is None:
                    files.pop(name, None)
                else:
                    files[name] = sha
            body = {"tool": "libra-des", "sha256": table_digest(files), "files": files}
            replace(self.folder / MANIFEST, (json.dumps(body, sort_keys=True, indent=1)
                                             + "\n").encode())
        self.files = files
        self.changed = {}


def record_write(path: Path, data: bytes | str) -> None:
    """Write one output file atomically and record it in its folder's manifest."""
    ledger = Ledger(path.parent)
    ledger.write(path.name, data)
    ledger.save()


def targets(folder: Path, names: Iterable[str], patterns: Iterable[str]) -> list[Path]:
    """The paths in ``folder`` a writer would replace or remove: ``names`` and every
    existing entry matching one of ``patterns``."""
    found = dict.fromkeys(folder / n for n in names)
    pats = tuple(patterns)
    if pats:
        with contextlib.suppress(OSError):
            found |= dict.fromkeys(p for p in sorted(folder.iterdir()) if p.name != MANIFEST
                                   and any(fnmatch.fnmatchcase(p.name, x) for x in pats))
    return list(found)


def check_target(path: Path, field: str, files: dict[str, str]) -> None:
    """A path a writer would replace: absent, or a file ``files`` records unchanged."""
    if not (path.exists() or path.is_symlink()):
        return
    check_special(path, field)
    if path.is_dir() and not path.is_symlink():
        raise InputError(field, str(path), "a file path (this is a folder)")
    if files.get(path.name) is None or file_digest(path) != files[path.name]:
        raise InputError(field, str(path), "a file libra-des wrote and nobody changed since "
                         "(this one is not: move it, or choose another output)")


def check_folder(folder: Path, field: str, names: Iterable[str] = (),
                 patterns: Iterable[str] = ()) -> None:
    """Refuse, before any work, an output folder the tool may not fill (module docstring):
    not a folder, not new/empty/ours, or holding at ``names``/``patterns`` a file that is
    not ours unchanged."""
    check_special(folder, field)
    if not (folder.exists() or folder.is_symlink()):
        return
    if not folder.is_dir():
        raise InputError(field, str(folder), f"{ALLOWED_FOLDER} (this path is a file)")
    try:
        if not any(folder.iterdir()):
            return
    except OSError as exc:
        why = errno.errorcode.get(exc.errno or 0, type(exc).__name__)
        raise InputError(field, str(folder), f"{ALLOWED_FOLDER} ({why})") from None
    files = load(folder)
    found = targets(folder, names, patterns)
    for path in found:  # a folder or a pipe where an output goes: named first
        if path.is_dir() or not (path.is_file() or not path.exists()):
            check_target(path, field, {})
    if files is None:
        raise InputError(field, str(folder), f"{ALLOWED_FOLDER} (it holds files and no valid "
                         f"libra-des manifest {MANIFEST}: choose another output folder)")
    for path in found:
        check_target(path, field, files)


def check_file(path: Path, field: str) -> None:
    """Refuse, before any work, a single output file that is not new or ours unchanged."""
    try:
        check_special(path.parent, field)
        files = load(path.parent)
        manifest = path.parent / MANIFEST
        if files is None and (manifest.exists() or manifest.is_symlink()):
            raise InputError(field, str(path), f"a folder whose {MANIFEST} libra-des wrote, "
                             "unchanged (this one is not: it would be replaced)")
        check_target(path, field, files or {})
    except OSError as exc:
        why = errno.errorcode.get(exc.errno or 0, type(exc).__name__)
        raise InputError(field, str(path), f"a usable output path ({why})") from None
