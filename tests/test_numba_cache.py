"""numba's cache goes to one per-user folder (``startup.cache_folder``), and the first compile
ever into it says so in one line on stderr, once."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

from libra_des.base import kernel_sources
from libra_des.base.startup import COMPILED_MARKER, cache_folder

#: Loads one small kernel module and calls its kernel (compiling it into the cache); prints
#: the result, whether it was loaded from the cache, and numba's own cache setting.
LOAD = (
    "import numpy as np\n"
    "import numba\n"
    "from libra_des.plan.pipeline_kernel import pipelined_rows\n"
    "print(pipelined_rows(np.ones((1, 2)), np.ones(1), np.ones(1), 2).sum())\n"
    "print(sum(pipelined_rows.stats.cache_hits.values()), repr(numba.config.CACHE_DIR))\n"
)


def load(folder: Path, clone: Path | None = None) -> subprocess.CompletedProcess[str]:
    """LOAD in a fresh process caching in ``folder``, importing the package under test (not
    whichever one the interpreter has installed), or the copy under ``clone``."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(folder.parent), "LIBRA_DES_CACHE": str(folder),
           "PYTHONPATH": str(clone or kernel_sources.PACKAGE.parent)}
    # cwd: ``python -c`` imports from the current folder first (the checkout, under pytest)
    return subprocess.run([sys.executable, "-c", LOAD], capture_output=True, text=True,
                          check=True, timeout=120, env=env, cwd=folder.parent)


def test_first_compile_says_so_once_and_caches_in_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    first = load(folder)
    lines = first.stderr.splitlines()
    assert len(lines) == 1 and "compiling kernels once" in lines[0] and str(folder) in lines[0]
    sources = folder / kernel_sources.digest()
    assert len(list(sources.glob(f"{COMPILED_MARKER}-*"))) == 1 and str(sources) in lines[0]
    assert any(sources.rglob("*.nbi"))  # numba's index files: the kernel was cached here
    second = load(folder)
    (value, hits, numba_folder), (again, hits_again, _) = (
        out.stdout.split() for out in (first, second))
    assert second.stderr == "" and again == value
    assert (hits, hits_again) == ("0", "1")  # compiled, then loaded from the cache
    assert numba_folder == "''"  # numba's own setting stays as it was (unset)


def test_a_second_clone_says_so_on_its_first_compile(tmp_path: Path) -> None:
    """A second copy of the same sources shares the cache folder (same digest), but numba keys
    its cache on the source file's path and time too, so the copy compiles again: it says so
    once, like the first."""
    folder = tmp_path / "cache"
    load(folder)
    clone = tmp_path / "clone"
    shutil.copytree(kernel_sources.PACKAGE, clone / "libra_des",
                    ignore=shutil.ignore_patterns("__pycache__"))
    first = load(folder, clone)
    assert "compiling kernels once" in first.stderr
    assert first.stdout.split()[1] == "0"  # numba compiled it again: the notice was due
    assert len(list((folder / kernel_sources.digest()).glob(f"{COMPILED_MARKER}-*"))) == 2
    again = load(folder, clone)
    assert again.stderr == "" and again.stdout.split()[1] == "1"


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
    """A kernel's own file, the modules it imports from (an alias, a commented group, a
    relative import, the package itself) and a kernel module it imports change the digest;
    a module no kernel imports, and numba's set-up modules (startup, the decorators), do not;
    a name in a docstring makes no kernel."""
    kernel = ("from libra_des.sim import consts as c\nfrom libra_des.sim.other import (\n"
              "    X,  # why\n    Y,\n)\nfrom . import rel\nfrom libra_des import top\n"
              "from libra_des.base.kernel import kernel\n")
    files = {"sim/__init__.py": "", "sim/consts.py": "A = 1\n", "sim/other.py": "X = Y = 2\n",
             "sim/rel.py": "R = 1\n", "top.py": "T = 1\n", "sim/kern.py": kernel,
             "sim/heap.py": "from libra_des.base.kernel import inline_kernel\n",
             "sim/plain.py": "B = 3\n", "base/__init__.py": "",
             "base/startup.py": '"""Sets numba up."""\n', "base/kernel.py": '"""Decorators."""\n',
             "doc.py": '"""from libra_des.base.kernel import kernel starts a kernel."""\n'}
    pkg = package(tmp_path / "a", files)
    names = {p.relative_to(pkg).as_posix() for p in kernel_sources.kernel_sources(pkg)}
    assert names == {"sim/kern.py", "sim/heap.py", "sim/consts.py", "sim/other.py",
                     "sim/rel.py", "top.py", "sim/__init__.py"}
    first = kernel_sources.digest(pkg)
    edits = {"sim/consts.py": "A = 2\n", "sim/other.py": "X = Y = 3\n", "sim/rel.py": "R = 2\n",
             "top.py": "T = 2\n", "sim/heap.py": "from libra_des.base.kernel import kernel\n",
             "sim/kern.py": kernel + "# edited\n"}
    for name, text in edits.items():
        changed = package(tmp_path / name.replace("/", "_"), {**files, name: text})
        assert kernel_sources.digest(changed) != first, name
    for name in ("sim/plain.py", "base/startup.py", "base/kernel.py"):
        same = package(tmp_path / f"same_{name.replace('/', '_')}", {**files, name: "B = 4\n"})
        assert kernel_sources.digest(same) == first, name


def test_no_sources_name_their_own_folder(tmp_path: Path) -> None:
    """A package without its sources (nothing to track) still gets a folder name."""
    assert kernel_sources.digest(package(tmp_path, {"x.py": "A = 1\n"})) == "no-sources"


def reference_imports(path: Path, root: Path) -> set[Path]:
    """The digest's import scan as a parse of the module (the form the scan replaced)."""
    tree = ast.parse(path.read_bytes())
    package = path.relative_to(root).parent.parts
    found: set[Path] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            dotted = [a.name.split(".") for a in node.names]
            bases = [root.joinpath(*p[1:]) for p in dotted if p[0] == root.name]
            names: list[str] = []
        elif isinstance(node, ast.ImportFrom):
            parts = node.module.split(".") if node.module else []
            if node.level:
                bases = [root.joinpath(*package[: len(package) - node.level + 1], *parts)]
            elif parts and parts[0] == root.name:
                bases = [root.joinpath(*parts[1:])]
            else:
                continue
            names = [a.name for a in node.names]
        else:
            continue
        for base in bases:
            maybe = [base.with_suffix(".py"), base / "__init__.py"]
            found.update(c for c in maybe + [base / f"{n}.py" for n in names] if c.is_file())
    return found


def test_the_import_scan_finds_what_a_parse_finds() -> None:
    """Over every module of the package, the line scan misses nothing the parse finds (it
    may add a file a docstring line names)."""
    root = kernel_sources.PACKAGE
    for path in sorted(root.rglob("*.py")):
        assert reference_imports(path, root) <= kernel_sources.imported_modules(path, root), path
