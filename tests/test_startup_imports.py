"""``libra-des plan`` stays a short command: what its run imports, and the lazy config names.

The import set is checked on a real (small) run in a fresh interpreter, so imports made at
run time count too (the balancer registry's first look-up, a progress bar, the help
formatter's rich). Timing lives in ``benchmarks/startup.py``.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys

import pytest

import libra_des.config as config
from libra_des import scenario
from libra_des.cli import main

#: Modules a ``plan --json`` run must not load: the scenario models and every balancer (the
#: registry's first look-up), the simulator and its graph, rich (no table, no progress bar),
#: scipy beyond the two normal-law ufuncs, the compiled kernels, the optional extras.
HEAVY = (
    "libra_des.scenario", "libra_des.plan.balancers", "libra_des.kinds.training", "simpy",
    "networkx", "rich", "scipy.special", "scipy.linalg", "scipy.stats", "numba",
    "matplotlib", "pandas", "torch",
)
PLAN = ["plan", "--workload", "longctx-1m", "--gbs", "8", "--windows", "1", "--json"]


def test_plan_run_imports_nothing_heavy() -> None:
    code = (
        "import contextlib, io, json, sys\n"
        "from libra_des.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        f"    code = main({PLAN!r})\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(json.dumps({'code': code, 'heavy': heavy, 'rows': len(json.loads("
        "out.getvalue())['results'])}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert json.loads(done.stdout) == {"code": 0, "heavy": [], "rows": 1}


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


def test_command_leaves_the_collector_as_it_found_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(PLAN) == 0
    assert json.loads(capsys.readouterr().out)["windows"] == 1
    assert gc.isenabled() and gc.get_freeze_count() == 0
    gc.disable()
    try:
        assert main(["plan", "--windows", "0"]) == 2  # bad input: also restored
        assert not gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        gc.enable()
