"""``libra-des plan`` stays a short command: what its run imports and starts, the lazy config
names, and the start-up measures of :mod:`libra_des.base.startup`.

The import set is checked on a real (small) run in a fresh interpreter, so imports made at
run time count too (the balancer registry's first look-up, a progress bar, the help
formatter's rich). Timing lives in ``benchmarks/startup.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import libra_des.config as config
from libra_des.base.startup import BLAS_THREAD_VARIABLES, blas_threads
from libra_des.config import scenario

#: Modules a ``plan --json`` run must not load: the scenario models and every balancer (the
#: registry's first look-up), the simulator and its graph, rich (no table, no progress bar),
#: the optional extras, scipy.special (the normal law is numpy's and math's), scipy.linalg
#: (numba's BLAS check would import it; a command's tuned process skips that check, see
#: startup.tune_process). (TAP's kernels and numba it does load.)
HEAVY = (
    "libra_des.config.scenario", "libra_des.plan.balancers.shipped", "libra_des.kinds.training",
    "simpy", "networkx", "rich", "scipy.stats", "scipy.special", "scipy.linalg", "matplotlib",
    "pandas", "torch",
)
PLAN = ["plan", "--workload", "longctx-1m", "--gbs", "16", "--windows", "2", "--json"]
#: Runs the plan command in a fresh interpreter; prints its exit code, the heavy modules it
#: loaded, its threads (Linux) and its JSON output.
RUN_PLAN = (
    "import contextlib, io, json, os, sys\n"
    "from libra_des.cli import main\n"
    "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
    f"    code = main({PLAN!r})\n"
    f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
    "tasks = len(os.listdir('/proc/self/task')) if os.path.isdir('/proc/self/task') else None\n"
    "print(json.dumps({'code': code, 'heavy': heavy, 'threads': tasks,\n"
    "                  'plan': json.loads(out.getvalue())}))\n"
)


def run_plan(**env: str) -> dict[str, Any]:
    clean = {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARIABLES}
    done = subprocess.run([sys.executable, "-c", RUN_PLAN], capture_output=True, text=True,
                          check=True, timeout=60, env={**clean, **env})
    out: dict[str, Any] = json.loads(done.stdout)
    for row in out["plan"]["results"]:
        row.pop("plan_seconds")  # a timing
    return out


def test_plan_run_imports_nothing_heavy_and_starts_no_blas_threads() -> None:
    out = run_plan()
    assert (out["code"], out["heavy"]) == (0, [])
    assert out["threads"] in (None, 1)  # OpenBLAS started without its worker threads
    assert len(out["plan"]["results"]) == 1
    # One BLAS thread changes no figure: the same run with four threads (as on a 4-core host).
    many = run_plan(OPENBLAS_NUM_THREADS="4")
    assert many["plan"] == out["plan"]
    assert many["threads"] is None or many["threads"] >= out["threads"]  # the user's setting


def test_blas_threads_restores_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in BLAS_THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with blas_threads("plan"):
        assert os.environ["OPENBLAS_NUM_THREADS"] == "1"
    assert "OPENBLAS_NUM_THREADS" not in os.environ
    with blas_threads("run"):  # a command with large linear algebra keeps the default
        assert "OPENBLAS_NUM_THREADS" not in os.environ
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    with blas_threads("plan"):  # the user's setting wins
        assert "OPENBLAS_NUM_THREADS" not in os.environ


def test_scenario_names_resolve_lazily_to_one_object() -> None:
    # Every class and function defined there (a new scenario model too) is re-exported.
    defined = {name for name, v in vars(scenario).items()
               if getattr(v, "__module__", None) == scenario.__name__}
    assert defined <= config.SCENARIO_NAMES
    for name in config.SCENARIO_NAMES:
        assert getattr(config, name) is getattr(scenario, name)
    from libra_des.config import TrainingScenario

    assert TrainingScenario is scenario.TrainingScenario
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = config.no_such_name  # type: ignore[attr-defined]


def test_shipped_scenarios_still_load_through_config(tmp_path: Path) -> None:
    sc = config.load_scenario(config.ROOT / "scenarios" / "quickstart.yaml")
    assert isinstance(sc, scenario.TrainingScenario)
    assert config.require_training(sc, "test") is sc


#: Sets numba up as a run does (``sys.argv[1]``: import scipy.linalg first, or not;
#: ``sys.argv[2]``: in a tuned process, as a command's, or not), then compiles a kernel that
#: calls ``np.dot`` (BLAS).
DOT_AFTER_SETUP = (
    "import sys\n"
    "import numpy as np\n"
    "if sys.argv[1] == 'scipy-first':\n"
    "    import scipy.linalg\n"
    "from libra_des.base.startup import numba_target, tune_process\n"
    "if sys.argv[2] == 'tuned':\n"
    "    tune_process()\n"
    "numba = numba_target()\n"
    "from numba.np import arraymath, linalg\n"
    "loaded = 'scipy.linalg' in sys.modules\n"
    "restored = linalg.ensure_blas.__qualname__ == 'ensure_blas'\n"
    "dot = numba.njit(lambda a, b: np.dot(a, b))\n"
    "print(arraymath._HAVE_BLAS, loaded, restored, float(dot(np.arange(3.0), np.arange(3.0))))\n"
)


@pytest.mark.parametrize("first", ["numba-first", "scipy-first"])
def test_numba_setup_is_the_same_whatever_was_imported(first: str) -> None:
    # Tuned (a command's process), numba's BLAS check answers "none" either way (so what
    # kernels compile to does not hang on import order), scipy.linalg is not loaded for it,
    # numba's check is its own again after, and np.dot in a kernel still finds BLAS.
    done = subprocess.run([sys.executable, "-c", DOT_AFTER_SETUP, first, "tuned"],
                          capture_output=True, text=True, check=True, timeout=120)
    loaded = str(first == "scipy-first")
    assert done.stdout.split() == ["False", loaded, "True", "5.0"]


def test_an_untuned_host_keeps_numbas_own_blas_check() -> None:
    # numba keeps the answer for the whole process: a library import must not decide it.
    done = subprocess.run([sys.executable, "-c", DOT_AFTER_SETUP, "numba-first", "untuned"],
                          capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.split() == ["True", "True", "True", "5.0"]
