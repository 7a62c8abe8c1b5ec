"""Kernels and the Python API are typed where they are called: mypy (the project's settings)
reveals a real type, not ``Any``, for calls of three compiled kernels and of
``load_scenario``, ``simulate`` and ``cost``, and rejects kernel calls with a wrong argument
(a list, an array of the wrong dtype).
One mypy run over a small probe file."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Six revealed calls, then two calls mypy must reject (a list, then an int64 array, where a
#: float64 array goes).
PROBE = '''
import numpy as np

import libra_des
from libra_des.hardware.compute.interference_kernel import stretched
from libra_des.plan.pipeline_kernel import pipelined_rows
from libra_des.workload.normal_kernel import quantiles

x = np.ones(3)
reveal_type(pipelined_rows(np.ones((2, 3)), x, x, 2))
reveal_type(stretched(x, x, 1.5, 1.2))
reveal_type(quantiles(x))
sc = libra_des.load_scenario("scenarios/quickstart.yaml", {"parallelism.dp": 16})
reveal_type(sc)
reveal_type(libra_des.simulate(sc, seed=1))
reveal_type(libra_des.cost("all_reduce", nbytes=8 << 20, group=8))
ints = np.ones(3, dtype=np.int64)  # (inline, the call's context would type it float64)
quantiles([0.5])  # WRONG
quantiles(ints)  # WRONG
'''
REVEALED = re.compile(r'probe\.py:(\d+): note: Revealed type is "(.*)"')


@pytest.mark.slow
def test_kernel_and_api_calls_have_types(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(ROOT / ".mypy_cache"), str(probe)],
        capture_output=True, text=True, timeout=900, cwd=ROOT)
    out = done.stdout
    revealed = REVEALED.findall(out)
    assert len(revealed) == 6, out
    types = [t for _, t in revealed]
    assert all(t != "Any" and not t.startswith("Any ") for t in types), types
    kernels, (scenario, result, seconds) = types[:3], types[3:]
    assert all("float64" in t for t in kernels), kernels  # the dtypes of the signatures
    assert "Scenario" in scenario and result.endswith("Result")
    assert seconds in ("float", "builtins.float")
    wrong = [n for n, line in enumerate(PROBE.splitlines(), 1) if line.endswith("# WRONG")]
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == len(wrong) == 2, out
    for line, error in zip(wrong, errors, strict=True):
        assert f"probe.py:{line}: error: Argument 1 to" in error, out


def test_mypy_runs_strict() -> None:
    """``make test``'s mypy pass is ``--strict``; the one relaxation is protoc's generated
    stub (a bare ``Mapping``), and third-party unannotated calls (numba, torch)."""
    import tomllib

    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert mypy["strict"] is True
    relaxed = [o for o in mypy.get("overrides", []) if not o.get("ignore_missing_imports")]
    assert [o["module"] for o in relaxed] == [["libra_des.sim.chakra.et_def_pb2"]]
    assert all(set(o) == {"module", "disallow_any_generics"} for o in relaxed), relaxed
