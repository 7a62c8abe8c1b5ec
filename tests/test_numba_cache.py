"""numba's cache goes to one per-user folder (``startup.cache_folder``), and the first compile
ever into it says so in one line on stderr, once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
    assert (folder / COMPILED_MARKER).exists()
    assert any(folder.rglob("*.nbi"))  # numba's index files: the kernel was cached here
    second = load(folder)
    assert second.stderr == "" and second.stdout == first.stdout


def test_cache_folder_order() -> None:
    assert cache_folder({"LIBRA_DES_CACHE": "/x/y", "XDG_CACHE_HOME": "/c"}) == Path("/x/y")
    assert cache_folder({"XDG_CACHE_HOME": "/c"}) == Path("/c/libra-des/numba")
    assert cache_folder({}) == Path("~/.cache/libra-des/numba").expanduser()
