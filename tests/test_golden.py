"""Every shipped scenario still gives its golden result (see ``tests/golden_results.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from golden_results import FREE_OVERLAP, GOLDEN, differences, golden_result

from libra_des.config import ROOT

SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_result_matches_golden(path: Path) -> None:
    stored = GOLDEN / f"{path.stem}.json"
    assert stored.is_file(), "no golden result: run .venv/bin/python tests/golden_results.py"
    found = differences(json.loads(stored.read_text()), golden_result(path))
    assert not found, "results moved (regenerate on purpose only):\n" + "\n".join(found[:20])


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_interference_off_is_the_free_overlap_result(path: Path) -> None:
    """``overlap.interference: off`` reproduces the results from before interference was
    modelled, exactly (only the scenario dump names the knob)."""
    stored = json.loads((FREE_OVERLAP / f"{path.stem}.json").read_text())
    got = golden_result(path, ("overlap.interference=off",))
    assert got["scenario"].pop("overlap") == {"interference": "off"}
    found = differences(stored, got)
    assert not found, "the free-overlap results moved:\n" + "\n".join(found[:20])


def test_differences_sees_a_last_digit_and_a_type_change() -> None:
    assert differences({"a": [1.0, 2]}, {"a": [1.0, 2]}) == []
    assert differences({"a": 1.0}, {"a": 1.0 + 1e-9}) != []
    assert differences({"a": 1}, {"a": 1.0}) != []
    assert differences({"a": 1}, {"b": 1}) != []
