"""What the compiled kernels are built from, as one digest that names their cache folder.

numba's disk cache checks only a kernel's own source file: a change to a jitted function it
calls from another module, or to a constant it imports (numba freezes globals into the
compiled code), leaves the cached machine code in use (numba's documentation, "Notes on
Caching", "Cache limitations"). So the cache folder is named by a digest of every kernel
module (a module that imports the kernel decorators of :mod:`libra_des.base.kernel`; its text
imports from that module at the start of a line) and of every ``libra_des`` module a kernel
module imports from directly (numba's set-up aside): a change to any of them gives a fresh
folder, where the kernels compile again once. Folders of earlier sources are left in place
(delete the cache folder to reclaim them).

Assumption: a kernel reads only what its own module imports directly (jitted helpers of
other kernel modules are covered as kernel modules themselves).
"""

from __future__ import annotations

import hashlib
import re
from functools import cache
from pathlib import Path

#: The package's own folder.
PACKAGE = Path(__file__).resolve().parents[1]
#: A kernel module's set-up line: an import from ``libra_des.base.kernel`` at the start of a
#: line (the decorators).
KERNEL_LINE = re.compile(rb"^from libra_des\.base\.kernel import ", re.MULTILINE)
#: Modules kernels import from without reading any value into compiled code: numba's set-up.
SET_UP = frozenset({"base/startup.py", "base/kernel.py"})
#: Hex digits of the digest kept in the folder name; what names it when no source is found
#: (a package installed without its ``.py`` files: no change can be tracked there).
DIGEST_CHARS = 16
NO_SOURCES = "no-sources"


@cache
def kernel_modules(root: Path) -> tuple[Path, ...]:
    """The kernel modules under ``root`` (the package folder), sorted; files that cannot be
    read (a dangling editor lock link) are not kernels. Read once per process (the digest
    and the stamp both ask)."""
    found = []
    for path in root.rglob("*.py"):
        try:
            text = path.read_bytes() if path.is_file() else b""
        except OSError:
            continue
        if KERNEL_LINE.search(text):
            found.append(path)
    return tuple(sorted(found))


#: An import statement at the start of a line (indented too: an import inside a function):
#: ``from MODULE import NAMES`` (a parenthesised group may span lines) or ``import A, B``.
#: A line of a docstring that reads like one only adds a file to the digest.
IMPORT = re.compile(
    rb"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)"
    rb"|import[ \t]+([^\n]*))", re.MULTILINE)
COMMENT = re.compile(rb"#[^\n]*")


def _names(text: bytes) -> list[str]:
    """The first word of each comma-separated item (``X as Y`` -> ``X``), comments out."""
    items = COMMENT.sub(b"", text).strip(b"()").split(b",")
    return [item.split()[0].decode() for item in items if item.split()]


def imported_modules(path: Path, root: Path) -> set[Path]:
    """The files of the package modules ``path`` imports from (``from libra_des.x import
    y``, relative forms included): the module named, or an imported name that is itself a
    module of that package. A scan of the import lines (:data:`IMPORT`), not a parse: every
    process digests the sources before its first kernel call."""
    text = path.read_bytes().replace(b"\\\n", b" ")
    package = path.relative_to(root).parent.parts
    found: set[Path] = set()
    for dots, module, names_text, plain in IMPORT.findall(text):
        if plain:
            dotted = [name.split(".") for name in _names(plain)]
            bases = [root.joinpath(*parts[1:]) for parts in dotted if parts[0] == root.name]
            names: list[str] = []
        else:
            parts = module.decode().split(".") if module else []
            if dots:
                up = package[: len(package) - len(dots) + 1]
                bases = [root.joinpath(*up, *parts)]
            elif parts and parts[0] == root.name:
                bases = [root.joinpath(*parts[1:])]
            else:
                continue
            names = _names(names_text)
        for base in bases:
            candidates = [base.with_suffix(".py"), base / "__init__.py"]
            candidates += [base / f"{name}.py" for name in names]
            found.update(c for c in candidates if c.is_file())
    return found


def kernel_sources(root: Path = PACKAGE) -> list[Path]:
    """Every kernel module and every package module one imports from (numba's set-up
    aside), sorted."""
    kernels = kernel_modules(root)
    found = set(kernels)
    for path in kernels:
        found |= imported_modules(path, root)
    return sorted(p for p in found if p.relative_to(root).as_posix() not in SET_UP)


@cache
def digest(root: Path = PACKAGE) -> str:
    """A digest of :func:`kernel_sources`' names (relative to ``root``) and contents."""
    sources = kernel_sources(root)
    if not sources:
        return NO_SOURCES
    hashed = hashlib.sha256()
    for path in sources:
        hashed.update(path.relative_to(root).as_posix().encode() + b"\0")
        hashed.update(path.read_bytes() + b"\0")
    return hashed.hexdigest()[:DIGEST_CHARS]


@cache
def stamp(root: Path = PACKAGE) -> str:
    """What numba's cache index keys a kernel on besides its source text: the kernel module's
    path (numba's cache subfolder is named after its source folder) and its modification time
    and size (numba's index is stale when either changes). A second clone of the same sources
    shares :func:`digest` but not this, and compiles its kernels again."""
    hashed = hashlib.sha256(str(root).encode() + b"\0")
    for path in kernel_modules(root):
        try:
            info = path.stat()
        except OSError:
            continue
        hashed.update(f"{path}\0{info.st_mtime}\0{info.st_size}\0".encode())
    return hashed.hexdigest()[:DIGEST_CHARS]
