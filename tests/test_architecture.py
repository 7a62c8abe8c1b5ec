"""The import graph follows the layers of ``docs/architecture.md`` (read from the source's AST).

Every import counts, including those inside functions (a lazy import is still a dependency);
imports under ``if TYPE_CHECKING:`` do not (they never run). So does a string that names a
module of the package (``importlib.import_module("libra_des.x")``, a registry loader's module
constant, an entry string ``"libra_des.x:NAME"``, an f-string's ``"libra_des.x."`` prefix): it
is a lazy import. A module may import its own layer or any layer ranked below it. torch and
matplotlib may be imported only inside a function.

The package's ``__init__`` is its face: it may name (lazily, by string) only the modules of
:data:`FACE`, whose names it re-exports. No module inside the package imports the face
(``from libra_des import ...`` or a bare ``import libra_des``): it imports the module it needs
(the version is ``base/version.py``'s).

The user entry points (``cli.py``, ``commands/``) import the package only through the API
(``libra_des.api`` and its use-case modules), its errors and each other (:data:`ENTRY_IMPORTS`;
the CLI also its process start-up, :data:`CLI_IMPORTS`); the API has no name table that hands
modules to them by string (:func:`test_no_command_face`).

Below the layers, the module graph has no circle: :func:`import_graph` draws an edge for every
import statement, at module level, inside a function or under ``if TYPE_CHECKING:`` (a type
checker still follows it) and for every string that names a module of the package (a
registry's loader naming its shipped list is an import too), and a circle is broken by
moving the shared piece down: a registry names its shipped list, whose entries import what an
entry declares (``kinds/kind.py``, ``plan/balancers/balancer.py``), never the registry.
``plan/`` prices nothing: of ``hardware/`` it imports only :data:`PLAN_HARDWARE`
(the cluster's description and memory arithmetic); the costed searches live in ``sim/``.

``paper_figs/`` (the paper figures, a package beside ``libra_des``) sits above all of it: it
imports libra_des only through its public face (:data:`PUBLIC`), and libra_des never imports
it, except the ``figs`` command, inside its handler (:data:`FIGS_ENTRY`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import networkx as nx
import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "libra_des"
PAPER_FIGS = PACKAGE.parent / "paper_figs"

#: Rank of each layer (a subpackage or top-level module below ``libra_des``; a dotted entry
#: ranks one sub-module apart from its subpackage); higher may import lower.
LAYERS: Mapping[str, int] = {
    "__init__": 0, "errors": 0, "registry": 0, "base": 0,
    "config": 1,
    "workload": 2,
    "hardware": 3,
    "plan": 4,
    # sim/ by subpackage: the network seam (and its flow engine, sim/network/flow/) under both
    # simulators; training below MoE prefill, and neither imports the other (INDEPENDENT);
    # then the rest of sim/ (chakra/: traces replayed through the cost model).
    "sim.network": 5,
    "sim.training": 6,
    "sim.moe": 7,
    "sim": 8,
    "results": 9,
    "kinds": 10,
    # runs/, the torch harness (calibrate/) and the report page: what the API offers above
    # the kinds (the report command hands report/ the figures it drew).
    "runs": 11, "calibrate": 11, "report": 11,
    "api": 12,
    "commands": 13, "cli": 13,
}
#: Layers that never import each other, whatever their ranks: the two simulators.
INDEPENDENT = frozenset({"sim.training", "sim.moe"})
#: What ``plan/`` may import of ``hardware/``: the cluster's description (topology, levels,
#: links, the fabric's rates), GPU memory arithmetic and attention tile geometry. Everything
#: else there prices or draws runtime noise (costs.py, cost_ops.py, collectives/,
#: compute/'s kernels and interference, profiles/' fits, variance/), which plans never
#: read: a search that prices plans (the costed TAP search, sim/training/tap_autotune.py)
#: lives above, in sim/.
PLAN_HARDWARE = ("libra_des.hardware.fabric", "libra_des.hardware.compute.memory",
                 "libra_des.hardware.compute.tiles")
#: The user entry points (``cli.py``, ``commands/``) reach the package only through these:
#: the API (the package's face for them), its errors and each other (a module or a dotted
#: prefix of one).
ENTRY_POINTS = ("libra_des.cli", "libra_des.commands")
ENTRY_IMPORTS = ("libra_des.api", "libra_des.errors", "libra_des.commands")
#: ``cli.py`` alone may also import the start-up set-up it runs before numpy loads.
CLI_IMPORTS = (*ENTRY_IMPORTS, "libra_des.base.startup")
#: What the package face (``libra_des/__init__.py``) may re-export from, by string.
FACE = ("libra_des.api", "libra_des.errors", "libra_des.results.tables")
#: A string that names a module of the package (an entry string may add ``:NAME``).
MODULE_STRING = re.compile(r"libra_des(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_]\w*)?")
#: What ``paper_figs`` may import of libra_des: the package face, the API, its errors, and
#: the plotting style helper it shares with the report (``report.figures.STAGES``).
PUBLIC = ("libra_des", "libra_des.api", "libra_des.errors", "libra_des.report.figures")
#: The one module of libra_des that may import paper_figs (lazily, inside a function).
FIGS_ENTRY = "libra_des.commands.figs"
#: Packages the core may import only lazily (optional extras).
OPTIONAL = ("torch", "matplotlib")


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str:
    """The longest entry of :data:`LAYERS` that ``module`` lies in: ``libra_des.sim.training``
    -> ``sim``; a dotted entry such as ``plan.x`` -> itself; the package -> ``__init__``;
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
        elif isinstance(node, ast.Constant | ast.JoinedStr):
            named = string_module(node)
            if named is not None:
                yield named, False
            if isinstance(node, ast.JoinedStr):
                continue
        inner = top and not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        yield from imports(node, module, inner)


def string_module(node: ast.Constant | ast.JoinedStr) -> str | None:
    """The module a string names (``"libra_des.x"``, an entry string ``"libra_des.x:NAME"``,
    an f-string's ``"libra_des.x."`` prefix), or None."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str) and MODULE_STRING.fullmatch(node.value):
            return node.value.split(":")[0]
        return None
    head = node.values[0] if node.values else None
    if isinstance(head, ast.Constant) and str(head.value).startswith("libra_des."):
        return str(head.value).rstrip(".")
    return None


def absolute(node: ast.ImportFrom, module: str) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")[: -node.level] if node.level else []
    return ".".join([*base, *([node.module] if node.module else [])])


def face_exports() -> dict[str, str]:
    """The package face's re-exports: public name -> the module that defines it."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "_EXPORTS":
            return dict(ast.literal_eval(node.value))
    return {}


def submodule(base: str, name: str) -> str:
    """``from libra_des import cli`` imports the layer ``cli``, ``from libra_des import
    simulate`` the module the face takes it from; ``__version__`` is the root's."""
    if base == "libra_des":
        if name in LAYERS:
            return f"{base}.{name}"
        return face_exports().get(name, base)
    return f"{base}.{name}" if base.startswith("libra_des.") else base


def face_imports(tree: ast.AST, module: str) -> list[str]:
    """Imports of the package face (``from libra_des import X``, ``import libra_des``, or a
    relative import of the package root) in a module of the package other than the face."""
    if module == "libra_des":
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and absolute(node, module) == "libra_des":
            names = ", ".join(alias.name for alias in node.names)
            found.append(f"{module}: imports {names} from the package face (import the "
                         "module that defines it)")
        elif isinstance(node, ast.Import) and any(a.name == "libra_des" for a in node.names):
            found.append(f"{module}: imports the package face libra_des")
    return found


def violations(sources: Mapping[str, str]) -> list[str]:
    """Every layering or optional-import breach in ``{module name: source text}``."""
    found = []
    for module, text in sorted(sources.items()):
        layer = layer_of(module)
        if layer not in LAYERS:
            found.append(f"{module}: layer {layer!r} has no rank (add it to LAYERS and the docs)")
            continue
        found += face_imports(ast.parse(text), module)
        allowed = CLI_IMPORTS if module == "libra_des.cli" else ENTRY_IMPORTS
        for target, top in imports(ast.parse(text), module):
            root = target.split(".")[0]
            if root in OPTIONAL and top:
                found.append(f"{module}: imports {target} at module level (import it lazily)")
            if root == "paper_figs" and (module != FIGS_ENTRY or top):
                found.append(f"{module}: imports {target} (libra_des never imports paper_figs; "
                             f"only {FIGS_ENTRY}, inside a function)")
            if root != "libra_des":
                continue
            dep = layer_of(target)
            if dep not in LAYERS and not top:
                continue  # a string such as an entry-point group, not a module
            if module == "libra_des" and target in FACE:
                continue
            if dep != layer and LAYERS.get(dep, 99) > LAYERS[layer]:
                found.append(f"{module}: imports {target} (layer {dep} is above {layer})")
            elif dep != layer and {dep, layer} <= INDEPENDENT:
                found.append(f"{module}: imports {target} (layers {layer} and {dep} are "
                             f"independent)")
            elif within(module, ("libra_des.plan",)) and within(target, ("libra_des.hardware",)) \
                    and not within(target, PLAN_HARDWARE):
                found.append(f"{module}: imports {target} (plan/ imports no hardware pricing; "
                             f"only {', '.join(PLAN_HARDWARE)})")
            elif within(module, ENTRY_POINTS) and not within(target, allowed):
                found.append(f"{module}: imports {target} (commands use only "
                             f"{', '.join(allowed)})")
    return found


def within(module: str, prefixes: tuple[str, ...]) -> bool:
    """``module`` is one of ``prefixes`` or inside one of them."""
    return any(module == p or module.startswith(f"{p}.") for p in prefixes)


def statement_imports(tree: ast.AST, module: str) -> Iterator[tuple[str, bool]]:
    """Every module named below ``tree`` by an import statement or a string (a registry's
    loader naming its shipped modules, ``import_module``, an entry string, an f-string's
    ``"libra_des.x."`` prefix): at module level, inside a function or under
    ``if TYPE_CHECKING:`` alike; each with whether a string named it."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((alias.name, False) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = absolute(node, module)
            yield from ((submodule(base, alias.name), False) for alias in node.names)
        elif isinstance(node, ast.Constant | ast.JoinedStr):
            named = string_module(node)
            if named is not None:
                yield named, True


def import_graph(sources: Mapping[str, str]) -> nx.DiGraph:
    """Module -> the package modules it imports (``from M import NAME``: ``M.NAME`` if that is
    a module, else ``M``; a string only where it names a module, not an entry-point group
    such as ``"libra_des.balancers"``)."""
    graph = nx.DiGraph()
    graph.add_nodes_from(sources)
    for module, text in sources.items():
        for target, by_string in statement_imports(ast.parse(text), module):
            if by_string and target not in sources:
                continue
            while target and target not in sources:
                target = target.rpartition(".")[0]
            if target and target != module:
                graph.add_edge(module, target)
    return graph


def import_cycles(sources: Mapping[str, str], most: int = 20) -> list[str]:
    """Up to ``most`` import circles of ``sources``, each as ``a -> b -> ... -> a`` from its
    first module in sorted order (sorted, so the report does not depend on set order)."""
    graph = import_graph(sources)
    found = []
    for component in nx.strongly_connected_components(graph):
        if len(component) > 1:
            for cycle in nx.simple_cycles(graph.subgraph(component)):
                start = cycle.index(min(cycle))
                cycle = cycle[start:] + cycle[:start]
                found.append(" -> ".join([*cycle, cycle[0]]))
                if len(found) >= most:
                    return sorted(found)
    return sorted(found)


def package_sources() -> dict[str, str]:
    return {module_name(p): p.read_text() for p in sorted(PACKAGE.rglob("*.py"))}


def figure_violations(sources: Mapping[str, str]) -> list[str]:
    """paper_figs modules that reach into libra_des past its public face (:data:`PUBLIC`), or
    import matplotlib / torch at module level."""
    found = []
    for module, text in sorted(sources.items()):
        for target, top in imports(ast.parse(text), module):
            root = target.split(".")[0]
            if root in OPTIONAL and top:
                found.append(f"{module}: imports {target} at module level (import it lazily)")
            parent = target.rsplit(".", 1)[0]  # ``from M import NAME`` reads as M.NAME
            allowed = target in PUBLIC or (parent != "libra_des" and parent in PUBLIC)
            if root == "libra_des" and not allowed:
                found.append(f"{module}: imports {target} (paper_figs uses only "
                             f"{', '.join(PUBLIC)})")
    return found


def figure_sources() -> dict[str, str]:
    return {module_name(p, PAPER_FIGS): p.read_text() for p in sorted(PAPER_FIGS.rglob("*.py"))}


def test_paper_figs_use_only_the_public_api() -> None:
    sources = figure_sources()
    assert len(sources) >= 17  # one module per figure
    assert figure_violations(sources) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("from libra_des.runs.sweep import Axis", "libra_des.runs.sweep"),
        ("def f():\n    from libra_des.cli import main", "libra_des.cli"),
        ("from libra_des import config", "libra_des.config"),
        ("import matplotlib.pyplot", "module level"),
    ],
)
def test_figure_checker_catches_breaches(text: str, expected: str) -> None:
    found = figure_violations({"paper_figs.libra_train.x": text})
    assert len(found) == 1 and expected in found[0], found


def test_figure_checker_allows_the_api() -> None:
    text = ("from libra_des import api\nfrom libra_des.errors import InputError\n"
            "import libra_des\nfrom libra_des.report.figures import STAGES\n"
            "def f():\n    from matplotlib.figure import Figure")
    assert figure_violations({"paper_figs.libra_moe.x": text}) == []


def test_package_follows_the_layers() -> None:
    sources = package_sources()
    assert len(sources) > 50  # the walk found the package
    assert violations(sources) == []


#: Most modules (``.py`` files, ``__init__`` included) one folder of the package may hold: a
#: larger one is split into subpackages by concept (our choice, the size a reader takes in).
MAX_FOLDER_MODULES = 20


def test_folders_stay_small() -> None:
    sizes = {folder: len(list(folder.glob("*.py"))) for folder in {p.parent for p in
             PACKAGE.rglob("*.py")}}
    assert len(sizes) > 10  # the walk found the subpackages
    assert {str(f.relative_to(PACKAGE.parent)): n for f, n in sizes.items()
            if n > MAX_FOLDER_MODULES} == {}


def test_no_import_cycles() -> None:
    assert import_cycles(package_sources()) == []


@pytest.mark.parametrize(
    ("sources", "expected"),
    [
        ({"libra_des.a": "from libra_des.b import X", "libra_des.b": "import libra_des.a"},
         ["libra_des.a -> libra_des.b -> libra_des.a"]),
        ({"libra_des.a": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                         "    from libra_des.b import X",
          "libra_des.b": "def f():\n    from libra_des.a import Y"}, ["libra_des.a"]),
        ({"libra_des.x.p": "from libra_des.x.p import m", "libra_des.x.p.m": "from .. import p"},
         ["libra_des.x.p"]),
        ({"libra_des.a": "from libra_des.b import X", "libra_des.b": "B = 'libra_des.a'"},
         ["libra_des.a -> libra_des.b -> libra_des.a"]),
        ({"libra_des.a": "from libra_des.b import X",
          "libra_des.b": "def f(m):\n    return f'libra_des.a.{m}'"}, ["libra_des.a"]),
        ({"libra_des.a": "from libra_des.b import X\nfrom libra_des.c import Y",
          "libra_des.b": "from libra_des.c import Z", "libra_des.c": "import numpy"}, []),
    ],
)
def test_cycle_check_finds_circles(sources: dict[str, str], expected: list[str]) -> None:
    found = import_cycles(sources)
    assert len(found) == len(expected)
    assert all(e in f for e, f in zip(expected, found, strict=True)), found


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
        ("libra_des.sim.x", "import libra_des.cli", "layer cli"),
        ("libra_des.config", "try:\n    import torch\nexcept ImportError:\n    pass", "torch"),
        ("libra_des.results.metrics", "class A:\n    import matplotlib.pyplot", "matplotlib"),
        ("libra_des.newthing", "import os", "no rank"),
        ("libra_des.report", "def f():\n    from paper_figs import catalog", "paper_figs"),
        ("libra_des.commands.figs", "from paper_figs import catalog", "paper_figs"),
        # Upward string imports: import_module, a loader's module constant, an entry string,
        # an f-string prefix; and a name taken from the package face.
        ("libra_des.hardware.x", "import importlib\nimportlib.import_module('libra_des.plan.step')",
         "layer plan"),
        ("libra_des.config.x", "BUILTIN = 'libra_des.plan.balancers.shipped'", "layer plan"),
        ("libra_des.workload.x", "ENTRY = 'libra_des.sim.moe.simulator:serve'", "layer sim"),
        ("libra_des.results.x", "def f(n):\n    return f'libra_des.commands.{n}'",
         "layer commands"),
        ("libra_des.results.trace", "from libra_des.api import simulate", "layer api"),
        # The package face, imported inside the package (even for a name it re-exports).
        ("libra_des.results.trace", "from libra_des.base import version\n"
                                    "from libra_des import __version__", "package face"),
        ("libra_des.kinds.x", "def f():\n    import libra_des", "package face"),
        ("libra_des.runs.x", "from .. import errors", "package face"),
        ("libra_des", "_EXPORTS = {'run': 'libra_des.runs.sweep'}", "layer runs"),
        # The entry points past the API: a plain, a lazy, a string import and the face.
        ("libra_des.commands.x", "from libra_des.config import load_scenario", "commands use"),
        ("libra_des.cli", "def f():\n    from libra_des.hardware.costs import CostModel",
         "commands use"),
        ("libra_des.commands.x", "M = importlib.import_module('libra_des.runs.sweep')",
         "commands use"),
        ("libra_des.commands.x", "import libra_des.kinds", "commands use"),
        ("libra_des.commands.x", "from libra_des.base.startup import blas_threads",
         "commands use"),
        ("libra_des.cli", "from libra_des.base.version import __version__", "commands use"),
        # The simulators apart; plan/ prices nothing.
        ("libra_des.sim.moe.x", "from libra_des.sim.training.opcost import layer_costs",
         "independent"),
        ("libra_des.sim.training.x", "def f():\n    from libra_des.sim.moe import layer",
         "layer sim.moe"),
        ("libra_des.sim.network.x", "from libra_des.sim.training import pipeline",
         "layer sim.training"),
        ("libra_des.plan.x", "from libra_des.hardware.costs import CostModel", "no hardware"),
        ("libra_des.plan.x", "def f():\n    from libra_des.hardware.collectives import a2a_batch",
         "no hardware"),
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
        ("libra_des.plan.x", "from libra_des.hardware.fabric.topology import Topology\n"
                             "from libra_des.hardware.compute.memory import MemoryModel"),
        ("libra_des.sim.moe.x", "from libra_des.sim.network.model import Traffic"),
        ("libra_des.commands.figs", "def handle():\n    from paper_figs import catalog"),
        ("libra_des.kinds.x", "BUILTIN = ('libra_des.kinds.training', 'libra_des.plan.step')"),
        ("libra_des.plan.x", "GROUP = 'libra_des.balancers'\nDOC = 'see libra_des.sim here'"),
        ("libra_des", "_EXPORTS = {'simulate': 'libra_des.api', 'InputError': 'libra_des.errors'}"),
        ("libra_des.commands.x", "from libra_des.api import load_scenario\n"
                                 "from libra_des.errors import InputError\n"
                                 "from libra_des.api.planning import rank_tap\n"
                                 "from libra_des.commands.common import dumps"),
        ("libra_des", "from libra_des.base.version import __version__"),
        ("libra_des.kinds.x", "import libra_des.kinds as kinds\nfrom . import moe"),
        ("libra_des.cli", "from libra_des.base.startup import blas_threads\n"
                          "def f(n):\n    return f'libra_des.commands.{n}'"),
    ],
)
def test_checker_allows_downward_and_lazy_imports(module: str, text: str) -> None:
    assert violations({module: text}) == []


def test_no_command_face() -> None:
    """The commands call typed API functions: no name table hands them the package's modules
    by string (the ``COMMAND_FACE`` that a PEP 562 ``__getattr__`` resolved), in the package,
    paper_figs or the docs."""
    banned = "COMMAND" + "_FACE"  # spelled apart so this file does not match itself
    roots = (PACKAGE, PAPER_FIGS, PACKAGE.parent / "docs")
    found = [str(p.relative_to(PACKAGE.parent)) for root in roots for p in sorted(root.rglob("*"))
             if p.suffix in (".py", ".md") and banned in p.read_text()]
    assert found == []
    api = PACKAGE / "api"
    assert api.is_dir()
    getattrs = [p.name for p in api.glob("*.py") if "def __getattr__" in p.read_text()]
    assert getattrs == []  # every API name is defined or imported where mypy sees it


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
