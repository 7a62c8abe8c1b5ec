"""What the compiled kernels are built from, as one digest that names their cache folder.

numba's disk cache checks only a kernel's own source file: a change to a jitted function it
calls from another module, or to a constant it imports (numba freezes globals into the
compiled code), leaves the cached machine code in use (numba's documentation, "Notes on
Caching", "Cache limitations"). So the cache folder is named by a digest of every kernel
module (a module that sets numba up through ``startup.numba_module()``; its text names that
call) and of every ``libra_des`` module a kernel module imports from directly: a change to any
of them gives a fresh folder, where the kernels compile again once.

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
#: Text that marks a kernel module.
KERNEL_MARK = "numba_module()"
#: ``from libra_des.x.y import a, b`` (also parenthesised over several lines).
IMPORT = re.compile(r"^from libra_des((?:\.\w+)+) import (?:\(([\w,\s]+)\)|([\w, ]+))",
                    re.MULTILINE)
#: Hex digits of the digest kept in the folder name.
DIGEST_CHARS = 16


def kernel_modules(root: Path) -> list[Path]:
    """The kernel modules under ``root`` (the package folder), sorted."""
    return sorted(p for p in root.rglob("*.py") if KERNEL_MARK in p.read_text(encoding="utf-8"))


def imported_modules(source: str, root: Path) -> set[Path]:
    """The files of the ``libra_des`` modules ``source`` imports from: the module named, or
    each imported name that is itself a module of that package."""
    found: set[Path] = set()
    for dotted, grouped, listed in IMPORT.findall(source):
        names = grouped or listed
        base = root.joinpath(*dotted.strip(".").split("."))
        candidates = [base.with_suffix(".py"), base / "__init__.py"]
        candidates += [base / f"{name.strip()}.py" for name in names.split(",") if name.strip()]
        found.update(path for path in candidates if path.is_file())
    return found


def kernel_sources(root: Path = PACKAGE) -> list[Path]:
    """Every kernel module and every module one imports from, sorted."""
    kernels = kernel_modules(root)
    found = set(kernels)
    for path in kernels:
        found |= imported_modules(path.read_text(encoding="utf-8"), root)
    return sorted(found)


@cache
def digest(root: Path = PACKAGE) -> str:
    """A digest of :func:`kernel_sources`' names (relative to ``root``) and contents."""
    hashed = hashlib.sha256()
    for path in kernel_sources(root):
        hashed.update(path.relative_to(root).as_posix().encode() + b"\0")
        hashed.update(path.read_bytes() + b"\0")
    return hashed.hexdigest()[:DIGEST_CHARS]
