"""A library leaves its host as it found it: importing libra_des, loading and simulating a
scenario and pricing an operation change none of the host's collector state (enabled, its
thresholds, its frozen objects, during the run too), its allocator settings, its environment
or numba's process-wide settings (its cache folder, its locators, its BLAS answer).
:func:`libra_des.tune_process` does change them: it is the one explicit way in.

Each check runs in a fresh interpreter that first sets its own state as a host would.
glibc's malloc thresholds cannot be read back, so the host sets its own mmap threshold
(1 MiB) and then observes it: a 2 MiB ``malloc`` must still be a fresh mapping
(``mallinfo2().hblks`` counts them), as it would not be under the library's 32 MiB
(:func:`libra_des.base.startup.reuse_heap`).
"""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from libra_des.base.startup import cache_folder

#: The host's own settings, then the library's calls (``sys.argv[1]``: "tune" calls
#: ``tune_process`` first), then what the host sees. Prints one JSON object.
HOST = '''
import ctypes, gc, json, os, sys
import numba

TUNE = sys.argv[1] == "tune"
libc = ctypes.CDLL(None)


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]


def mapped_malloc():
    """Whether a 2 MiB malloc gets a mapping of its own (the mmap threshold is below it)."""
    before = libc.mallinfo2().hblks
    block = libc.malloc(2 << 20)
    mapped = libc.mallinfo2().hblks == before + 1
    libc.free(block)
    return mapped


@numba.njit(cache=True)
def host_kernel(x):
    return x + 1


def host_frozen():
    """How many of the host's objects are frozen (in no generation the collector walks)."""
    walked = {id(o) for o in gc.get_objects()}
    return sum(id(row) not in walked for row in host_objects)


def state():
    caching = numba.core.caching
    return {"enabled": gc.isenabled(), "threshold": list(gc.get_threshold()),
            "host_frozen": host_frozen(), "env": dict(os.environ),
            "numba_cache_dir": numba.config.CACHE_DIR,
            "locators": [c.__qualname__ for c in caching.CompileResultCacheImpl._locator_classes],
            "mapped_malloc": mapped_malloc()}


libc.mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD: the host's own
gc.set_threshold(1234, 7, 9)
host_objects = [{"row": [i]} for i in range(10_000)]
gc.freeze()
frozen = gc.get_freeze_count()
host_kernel(1)  # the host's own numba, cached where the host said
seen = []  # the collector's settings at each collection during the library's calls
gc.callbacks.append(lambda phase, info: seen.append((gc.get_threshold(), gc.get_freeze_count()))
                    if phase == "start" else None)
before = state()

import libra_des

if TUNE:
    libra_des.tune_process()
sc = libra_des.load_scenario(sys.argv[2], json.loads(sys.argv[3]))
result = libra_des.simulate(sc, seed=1)
seconds = libra_des.cost("all_reduce", nbytes=8 << 20, group=8)
after = state()
from libra_des.base.startup import long_lived_run  # a training run's span, on its own
with long_lived_run():
    in_run = list(gc.get_threshold())
# Frozen objects the collector holds: the host's, less any freed since (none added).
print(json.dumps({"before": before, "after": after, "frozen": [frozen, gc.get_freeze_count()],
                  "tokens": result["tokens_per_s"], "seconds": seconds, "in_run": in_run,
                  "during": sorted({json.dumps(s) for s in seen}),
                  "kernels": "libra_des.plan.tap_kernel" in sys.modules}))
'''
#: A small training run (64 GPUs, a short model; as tests/test_api.py's).
SMALL = {"parallelism.dp": 8, "parallelism.cp": 4, "parallelism.pp": 2, "parallelism.gbs": 32,
         "balancer.pool_size": 4, "workload": "longctx-256k", "model.layers": 4}
QUICKSTART = Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.yaml"


def glibc_mallinfo2() -> bool:
    """Whether this C library has glibc's ``mallinfo2`` (glibc 2.33 and later)."""
    try:
        return hasattr(ctypes.CDLL(None), "mallinfo2")
    except OSError:
        return False


def host_run(tmp_path: Path, mode: str) -> dict[str, Any]:
    """The host script's report, run in a fresh interpreter with its own numba cache folder
    (the host's kernel is cached from a file, so numba can cache it)."""
    script = tmp_path / "host.py"
    script.write_text(HOST)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": ":".join(sys.path),
           "NUMBA_CACHE_DIR": str(tmp_path / "host-numba"),
           "LIBRA_DES_CACHE": str(cache_folder())}  # the user's: kernels compiled already
    done = subprocess.run([sys.executable, str(script), mode, str(QUICKSTART), json.dumps(SMALL)],
                          capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    out: dict[str, Any] = json.loads(done.stdout)
    assert out["kernels"] and out["tokens"] > 0 and out["seconds"] > 0  # the work was done
    return out


pytestmark = pytest.mark.skipif(not glibc_mallinfo2(), reason="needs glibc's mallinfo2")


def test_the_library_leaves_its_host_as_it_found_it(tmp_path: Path) -> None:
    out = host_run(tmp_path, "plain")
    before, after = out["before"], out["after"]
    assert before["host_frozen"] == 10_000 and before["mapped_malloc"]  # the host's state holds
    assert after == before  # the host's objects still frozen: nothing unfroze them
    frozen, frozen_after = out["frozen"]
    assert frozen_after <= frozen  # nothing froze more (frozen objects may be freed)
    # During the run too: every collection saw the host's thresholds, nothing frozen more.
    during = [json.loads(s) for s in out["during"]]
    assert during and all(t == [1234, 7, 9] and n <= frozen for t, n in during)
    assert out["in_run"] == [1234, 7, 9]
    # The host's own kernel is cached in the host's folder, ours elsewhere.
    assert any((tmp_path / "host-numba").rglob("host.host_kernel-*.nbi"))
    assert not any((tmp_path / "host-numba").rglob("*_kernel.*.nbi"))


def test_tune_process_is_the_explicit_way_in(tmp_path: Path) -> None:
    tuned = host_run(tmp_path, "tune")
    before, after = tuned["before"], tuned["after"]
    assert not after["mapped_malloc"]  # glibc's threshold raised to 32 MiB
    # Tuning froze more; a training run thawed the whole frozen generation at its end (the
    # host's objects too), and raises the young-collection threshold while it runs.
    during = [json.loads(s) for s in tuned["during"]]
    assert any(n > tuned["frozen"][0] for _, n in during)
    assert before["host_frozen"] == 10_000 and after["host_frozen"] == 0
    assert tuned["in_run"][0] > 1234
    # Results are the same tuned or not.
    plain = host_run(tmp_path, "plain")
    assert (tuned["tokens"], tuned["seconds"]) == (plain["tokens"], plain["seconds"])
