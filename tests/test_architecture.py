"""The import graph follows the layers of ``docs/architecture.md`` (read from the source's AST).

Every import counts, including those inside functions (a lazy import is still a dependency);
imports under ``if TYPE_CHECKING:`` do not (they never run). A module may import its own layer
or any layer ranked below it. torch and matplotlib may be imported only inside a function.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "libra_des"

#: Rank of each layer (a subpackage or top-level module below ``libra_des``; a dotted entry
#: ranks one sub-module apart from its subpackage); higher may import lower.
LAYERS: Mapping[str, int] = {
    "__init__": 0, "errors": 0, "registry": 0, "base": 0,
    "config": 1,
    # Until the config stops validating balancer names itself (it still asks the registry).
    "plan.balancers.registry": 1,
    "workload": 2,
    "hardware": 3,
    "plan": 4,
    "sim": 5,
    "results": 6,
    "kinds": 7,
    "runs": 8,
    "api": 9,
    # report/ at the commands' rank while its figures import figures/ (a paper-figure module's
    # stage list); once the report gets its figures passed in, it ranks below the API.
    "commands": 10, "cli": 10, "figures": 10, "report": 10,
}
#: Packages the core may import only lazily (optional extras).
OPTIONAL = ("torch", "matplotlib")


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str:
    """The longest entry of :data:`LAYERS` that ``module`` lies in: ``libra_des.sim.training``
    -> ``sim``; ``libra_des.plan.balancers.registry`` -> itself; the package -> ``__init__``;
    a module of no ranked layer -> its first component (reported as unranked)."""
    parts = module.split(".")[1:]
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in LAYERS:
            return ".".join(parts[:end])
    return parts[0] if parts else "__init__"


def is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports(tree: ast.AST, module: str, top: bool = True) -> Iterator[tuple[str, bool]]:
    """(imported module, at module level) for every runtime import below ``tree``."""
    for node in ast.iter_child_nodes(tree):
        if is_type_checking(node):
            yield from imports(ast.Module(body=node.orelse, type_ignores=[]), module, top)
            continue
        if isinstance(node, ast.Import):
            yield from ((alias.name, top) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = absolute(node, module)
            yield from ((submodule(base, alias.name), top) for alias in node.names)
        inner = top and not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        yield from imports(node, module, inner)


def absolute(node: ast.ImportFrom, module: str) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")[: -node.level] if node.level else []
    return ".".join([*base, *([node.module] if node.module else [])])


def submodule(base: str, name: str) -> str:
    """``from libra_des import cli`` imports the layer ``cli``; ``__version__`` is the root's."""
    if base == "libra_des":
        return f"{base}.{name}" if name in LAYERS else base
    return f"{base}.{name}" if base.startswith("libra_des.") else base


def violations(sources: Mapping[str, str]) -> list[str]:
    """Every layering or optional-import breach in ``{module name: source text}``."""
    found = []
    for module, text in sorted(sources.items()):
        layer = layer_of(module)
        if layer not in LAYERS:
            found.append(f"{module}: layer {layer!r} has no rank (add it to LAYERS and the docs)")
            continue
        for target, top in imports(ast.parse(text), module):
            root = target.split(".")[0]
            if root in OPTIONAL and top:
                found.append(f"{module}: imports {target} at module level (import it lazily)")
            if root != "libra_des":
                continue
            dep = layer_of(target)
            if dep != layer and LAYERS.get(dep, 99) > LAYERS[layer]:
                found.append(f"{module}: imports {target} (layer {dep} is above {layer})")
    return found


def package_sources() -> dict[str, str]:
    return {module_name(p): p.read_text() for p in sorted(PACKAGE.rglob("*.py"))}


def test_package_follows_the_layers() -> None:
    sources = package_sources()
    assert len(sources) > 50  # the walk found the package
    assert violations(sources) == []


def test_every_layer_is_documented() -> None:
    """Each ranked layer (a module or subpackage) is named in docs/architecture.md."""
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    present = {layer_of(m) for m in package_sources()}
    paths = {n: n.replace(".", "/") for n in present - {"__init__"}}
    missing = [n for n, p in paths.items() if f"{p}.py" not in doc and f"{p}/" not in doc]
    assert missing == []


@pytest.mark.parametrize(
    ("module", "text", "expected"),
    [
        ("libra_des.plan.x", "from libra_des.sim.training.pipeline import PipelineSim",
         "layer sim"),
        ("libra_des.hardware.x", "def f():\n    import libra_des.plan.step", "layer plan"),
        ("libra_des.runs.sweep", "from libra_des.commands.run import simulate", "layer commands"),
        ("libra_des.sim.x", "from libra_des import __version__, cli", "layer cli"),
        ("libra_des.config", "try:\n    import torch\nexcept ImportError:\n    pass", "torch"),
        ("libra_des.results.metrics", "class A:\n    import matplotlib.pyplot", "matplotlib"),
        ("libra_des.newthing", "import os", "no rank"),
    ],
)
def test_checker_catches_breaches(module: str, text: str, expected: str) -> None:
    found = violations({module: text})
    assert len(found) == 1 and expected in found[0], found


@pytest.mark.parametrize(
    ("module", "text"),
    [
        ("libra_des.sim.x", "from libra_des.plan.step import StepPlan"),
        ("libra_des.commands.x", "def f():\n    import torch"),
        ("libra_des.plan.x", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                             "    from libra_des.sim.training.simulator import Cluster"),
        ("libra_des.plan.moe.x", "from . import eplb\nfrom .. import grouping"),
    ],
)
def test_checker_allows_downward_and_lazy_imports(module: str, text: str) -> None:
    assert violations({module: text}) == []


def test_citations_resolve_inside_the_repository() -> None:
    """Docstrings cite ``docs/model.md`` (and its parts A / B), never a file outside the repo."""
    model = (PACKAGE.parent / "docs" / "model.md").read_text()
    parts = set(re.findall(r"^## ([A-Z])\. ", model, flags=re.MULTILINE))
    assert parts == {"A", "B"}
    sources = package_sources()
    assert [m for m, text in sources.items() if "PAPERS.md" in text] == []
    cited = {p for text in sources.values()
             for p in re.findall(r"docs/model\.md(?: part)? ([A-Z])\b", text)}
    assert cited and cited <= parts
