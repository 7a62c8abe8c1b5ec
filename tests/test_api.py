"""The Python API (``libra_des.simulate`` and friends) agrees with the commands it mirrors."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import libra_des
from libra_des.cli import main
from libra_des.config import ROOT

QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"
MOE = ROOT / "scenarios" / "paper-moe-breakdown.yaml"
#: A small training layout (64 GPUs, as in test_training) with a short model.
SMALL = [
    "parallelism.dp=8", "parallelism.cp=4", "parallelism.pp=2", "parallelism.gbs=32",
    "balancer.pool_size=4", "workload=longctx-256k", "model.layers=4",
]


def without_wall(text: str) -> dict[str, Any]:
    """A result, checked to hold no wall-clock field (that goes to run.json)."""
    data: dict[str, Any] = json.loads(text)
    assert "wall_s" not in data
    return data


def test_import_is_lazy() -> None:
    """``import libra_des`` loads neither numpy nor pydantic; the API loads on first use."""
    code = (
        "import sys, libra_des; heavy = [m for m in ('numpy', 'pydantic', 'simpy') "
        "if m in sys.modules]; libra_des.simulate; print(heavy, 'libra_des.api' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] True"


def test_every_api_module_imports_its_work_lazily() -> None:
    """Each use-case module imports the layers that do the work inside its functions: loading
    all of them loads no numpy, simulator, hardware model or runner."""
    code = (
        "import importlib, pkgutil, sys, libra_des.api as api\n"
        "names = [m.name for m in pkgutil.iter_modules(api.__path__)]\n"
        "for name in names: importlib.import_module(f'libra_des.api.{name}')\n"
        "heavy = ('numpy', 'simpy', 'networkx', 'rich', 'libra_des.hardware', 'libra_des.sim',\n"
        "         'libra_des.kinds', 'libra_des.runs', 'libra_des.report')\n"
        "print(len(names), [m for m in heavy if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    count, loaded = out.stdout.split(" ", 1)
    assert int(count) >= 10 and loaded.strip() == "[]"


def test_exports() -> None:
    from libra_des import api, errors

    assert libra_des.simulate is api.simulate
    assert libra_des.InputError is errors.InputError
    assert set(libra_des.__all__) == {"__version__", *libra_des._EXPORTS}
    assert all(callable(getattr(libra_des, name)) for name in libra_des._EXPORTS)
    with pytest.raises(AttributeError):
        _ = libra_des.no_such_name


def test_simulate_equals_run_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sets = [x for s in SMALL for x in ("--set", s)]
    assert main(["run", str(QUICKSTART), "--out", str(tmp_path), "--json", *sets]) == 0
    capsys.readouterr()
    written = (tmp_path / "result.json").read_text()
    res = libra_des.simulate(QUICKSTART, SMALL)
    assert res.kind == "training"
    assert without_wall(res.to_json()) == without_wall(written)
    assert res["policy"] == "libra" and res.to_dict()["gpus"] == 64


def test_override_forms_agree() -> None:
    """``--set`` strings, a mapping, ``seed=`` and a scenario object give one scenario."""
    texts = [*SMALL, "seed=3", "balancer.policy=ulysses"]
    by_path = libra_des.load_scenario(QUICKSTART, texts)
    # Mapping values are typed (strict validation refuses "4" for a number), so parse them.
    pairs = (t.split("=", 1) for t in SMALL)
    mapping = {"balancer.policy": "ulysses", **{k: yaml.safe_load(v) for k, v in pairs}}
    by_map = libra_des.load_scenario(QUICKSTART, mapping, seed=3)
    by_object = libra_des.load_scenario(libra_des.load_scenario(QUICKSTART, SMALL),
                                        {"balancer.policy": "ulysses"}, seed=3)
    assert by_map == by_path == by_object
    assert by_path.seed == 3 and by_path.balancer.policy == "ulysses"


def test_result_is_read_only() -> None:
    res = libra_des.simulate(MOE, {"model.layers": 2, "workload.batches": 1})
    assert res.kind == "moe_inference" and res.trace is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.kind = "training"  # type: ignore[misc]
    with pytest.raises(TypeError):
        res.data["kind"] = "training"  # type: ignore[index]


def test_step_plan_is_the_simulated_plan() -> None:
    """The plans of steps 0 and 1 are the ones the two-step simulation reports (mean)."""
    sets = [*SMALL, "steps=2", "balancer.vrsp=false"]
    res = libra_des.simulate(QUICKSTART, sets)
    plans = [libra_des.step_plan(QUICKSTART, sets, step=s) for s in (0, 1)]
    assert plans[0].inter_pool_imbalance != plans[1].inter_pool_imbalance  # different windows
    for key in ("inter_pool", "intra_pool"):
        mean = sum(getattr(p, f"{key}_imbalance") for p in plans) / 2
        assert res["attention_imbalance"][key] == pytest.approx(mean, rel=1e-12)


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: libra_des.load_scenario(QUICKSTART, seed=-1), "seed"),
        (lambda: libra_des.simulate(QUICKSTART, ["parallelism.dp=0"]), "parallelism.dp"),
        (lambda: libra_des.step_plan(MOE), "kind"),
        (lambda: libra_des.step_plan(QUICKSTART, step=-1), "step"),
        (lambda: libra_des.cost("broadcast_all"), "op"),
        (lambda: libra_des.cost("gemm", gemm=(8, 8, 8), dtype="fp3"), "dtype"),
    ],
)
def test_bad_input_is_one_line(call: Any, field: str) -> None:
    with pytest.raises(libra_des.InputError) as info:
        call()
    assert info.value.field == field
    assert info.value.line().startswith(f"error: {field}: got ") and "\n" not in info.value.line()


@pytest.mark.parametrize(
    ("argv", "kwargs"),
    [
        (["--op", "all_reduce", "--bytes", "8388608", "--group", "16"],
         {"op": "all_reduce", "nbytes": 8388608, "group": 16}),
        (["--op", "attention", "--doc-lengths", "4096,8192", "--heads", "8", "--cp", "2"],
         {"op": "attention", "doc_lengths": [4096, 8192], "heads": 8, "cp": 2}),
        (["--op", "gemm", "--m", "4096", "--n", "2048", "--k", "1024"],
         {"op": "gemm", "gemm": (4096, 2048, 1024)}),
    ],
)
def test_cost_equals_cost_command(
    argv: list[str], kwargs: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cost", *argv, "--json"]) == 0
    seconds = json.loads(capsys.readouterr().out)["seconds"]
    assert seconds > 0
    assert libra_des.cost(**kwargs) == seconds
