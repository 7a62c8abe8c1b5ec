"""numba's cache goes to one per-user folder (``startup.cache_folder``), and the first compile
ever into it says so in one line on stderr, once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from libra_des.base import kernel_sources
from libra_des.base.startup import COMPILED_MARKER, cache_folder

#: Loads one small kernel module and calls its kernel (compiling it into the cache).
LOAD = (
    "import numpy as np\n"
    "from libra_des.plan.pipeline_kernel import pipelined_rows\n"
    "print(pipelined_rows(np.ones((1, 2)), np.ones(1), np.ones(1), 2).sum())\n"
)


def load(folder: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(folder.parent), "LIBRA_DES_CACHE": str(folder)}
    return subprocess.run([sys.executable, "-c", LOAD], capture_output=True, text=True,
                          check=True, timeout=120, env=env)


def test_first_compile_says_so_once_and_caches_in_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    first = load(folder)
    lines = first.stderr.splitlines()
    assert len(lines) == 1 and "compiling kernels once" in lines[0] and str(folder) in lines[0]
    sources = folder / kernel_sources.digest()
    assert (sources / COMPILED_MARKER).exists() and str(sources) in lines[0]
    assert any(sources.rglob("*.nbi"))  # numba's index files: the kernel was cached here
    second = load(folder)
    assert second.stderr == "" and second.stdout == first.stdout


def test_cache_folder_order() -> None:
    assert cache_folder({"LIBRA_DES_CACHE": "/x/y", "XDG_CACHE_HOME": "/c"}) == Path("/x/y")
    assert cache_folder({"XDG_CACHE_HOME": "/c"}) == Path("/c/libra-des/numba")
    assert cache_folder({}) == Path("~/.cache/libra-des/numba").expanduser()


def package(root: Path, files: dict[str, str]) -> Path:
    """A package folder ``libra_des`` under ``root`` with ``files`` (relative path: text)."""
    pkg = root / "libra_des"
    for name, text in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    return pkg


def test_the_digest_follows_what_kernels_import(tmp_path: Path) -> None:
    """A kernel's own file, a module it imports a constant from, and a kernel module it
    imports change the digest; a module no kernel imports does not."""
    kernel = ("from libra_des.sim import consts\nfrom libra_des.sim.other import (\n    X,\n"
              "    Y,\n)\nnumba = numba_module()\n")
    files = {"sim/__init__.py": "", "sim/consts.py": "A = 1\n", "sim/other.py": "X = Y = 2\n",
             "sim/kern.py": kernel, "sim/heap.py": "numba = numba_module()\n",
             "sim/plain.py": "B = 3\n"}
    pkg = package(tmp_path / "a", files)
    names = {p.relative_to(pkg).as_posix() for p in kernel_sources.kernel_sources(pkg)}
    assert names == {"sim/kern.py", "sim/heap.py", "sim/consts.py", "sim/other.py",
                     "sim/__init__.py"}
    first = kernel_sources.digest(pkg)
    for name, text in [("sim/consts.py", "A = 2\n"), ("sim/other.py", "X = Y = 3\n"),
                       ("sim/heap.py", "numba = numba_module()\nZ = 1\n"),
                       ("sim/kern.py", kernel + "# edited\n")]:
        changed = package(tmp_path / name.replace("/", "_"), {**files, name: text})
        assert kernel_sources.digest(changed) != first, name
    same = package(tmp_path / "plain", {**files, "sim/plain.py": "B = 4\n"})
    assert kernel_sources.digest(same) == first
