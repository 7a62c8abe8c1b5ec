"""The recipes of ``docs/architecture.md`` ("How to add each kind of thing") say how many
files a new network model, balancer, MoE system and GPU take; each names a toy in ``tests/``
that is that many files: it leans on no other test file (it imports only the package, the
standard library and the package's own dependencies)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Recipe title -> the words that state its file count in the doc.
RECIPES = {
    "A network model": "one module",
    "A training balancer": "one module",
    "An MoE system": "one module",
    "A GPU": "one YAML file",
}
THIRD_PARTY = {"numpy", "simpy", "yaml"}


def recipe(title: str) -> str:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## How to add each kind of thing", 1)[1].split("\n## ", 1)[0]
    bullets = re.split(r"\n- ", section)
    found = [b for b in bullets if b.startswith(f"**{title}**")]
    assert len(found) == 1, f"no recipe {title!r} in docs/architecture.md"
    return " ".join(found[0].split())


@pytest.mark.parametrize("title", sorted(RECIPES))
def test_recipe_file_count_is_the_toys(title: str) -> None:
    body = recipe(title)
    assert RECIPES[title] in body, body
    toys = sorted(set(re.findall(r"`(tests/toy_[a-z_]+\.(?:py|yaml))`", body)))
    assert len(toys) == 1, (title, toys)  # one toy, one file
    toy = ROOT / toys[0]
    assert toy.is_file(), toy
    if toy.suffix != ".py":
        return
    imported = set()
    for node in ast.walk(ast.parse(toy.read_text())):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
    others = imported - {"libra_des", "__future__"} - THIRD_PARTY - sys.stdlib_module_names
    assert not others, f"{toy.name} needs more than itself: {sorted(others)}"
