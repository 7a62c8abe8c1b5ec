"""No module compares against a registered name: balancer, MoE system, predictor, scenario
kind, pipeline schedule, length law or network model (fidelity).

Adding one is registering it (``training_balancers``, ``plan.moe.registry``,
``workload.predictors.PREDICTORS``, ``kinds``, ``sim.training.schedules``,
``workload.lengths``, ``sim.network.models``); code that asks
``policy == "libra"`` would silently leave a newcomer out. The registries themselves (and the
modules that declare one entry each) may name what they register.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from libra_des import kinds
from libra_des.plan.balancers import registry as training_balancers
from libra_des.plan.moe.registry import moe_system_names
from libra_des.sim.network import models as network_models
from libra_des.sim.training import schedules
from libra_des.workload import lengths
from libra_des.workload.predictors import PREDICTORS

PACKAGE = Path(__file__).resolve().parent.parent / "libra_des"
#: Modules that declare registry entries: they name what they register.
REGISTRIES = ("plan/balancers/", "plan/moe/", "kinds/__init__.py", "kinds/training.py",
              "kinds/moe.py", "workload/predictors.py", "config/__init__.py",
              "sim/training/schedules.py", "workload/lengths.py", "sim/network/models.py")


def names() -> frozenset[str]:
    return frozenset({*training_balancers.names(), *moe_system_names(), *PREDICTORS,
                      *kinds.names(), *schedules.names(), *lengths.names(),
                      *network_models.names()})


def constants(node: ast.AST) -> Iterator[str]:
    """The string constants a comparison operand is or holds (``("a", "b")`` gives both)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.Tuple | ast.List | ast.Set):
        for item in node.elts:
            yield from constants(item)


def named_comparisons(text: str, known: frozenset[str]) -> list[str]:
    """``line: name`` of every comparison (==, !=, in, not in) against a registered name."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                found += [f"{node.lineno}: {c}" for c in constants(operand) if c in known]
    return found


def test_no_comparison_against_a_registered_name() -> None:
    known = names()
    hits = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not rel.startswith(REGISTRIES):
            hits += [f"{rel}:{hit}" for hit in named_comparisons(path.read_text(), known)]
    assert hits == []


@pytest.mark.parametrize("text", [
    'if policy == "libra":\n    pass',
    'x = p in ("ulysses", "distca")',
    'ok = "lina" != predictor',
    'if kind not in {"moe_inference"}:\n    pass',
    'if scenario.fidelity == "detailed":\n    pass',
    'x = 1 if name == "interleaved" else 0',
])
def test_checker_sees_a_comparison(text: str) -> None:
    assert len(named_comparisons(text, names())) >= 1


def test_checker_ignores_other_strings_and_loops() -> None:
    text = 'for p in ("libra", "ulysses"):\n    pass\nif mode == "quick":\n    pass\n'
    assert named_comparisons(text, names()) == []
