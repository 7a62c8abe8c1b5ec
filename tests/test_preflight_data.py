"""The preflight's coefficients against the measured runs stored beside them
(``libra_des/kinds/preflight.yaml``, written by ``benchmarks/preflight_check.py``).

No run is timed here: the stored measurements are data, and the estimate for each must stay
within 3x of its measured CPU time and at or above its measured peak, so a coefficient edited
by hand (or a change to the estimate's terms) that breaks the promise fails.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from libra_des.config import ROOT, load_scenario
from libra_des.kinds import feasibility, preflight

DATA = yaml.safe_load(preflight.DATA.read_text())
#: The scale study's cases (``benchmarks/scale_study.py``): the promise covers each of them.
SCALE_STUDY = {f"scale-{g}-{f}" for g in (1024, 4096, 16384) for f in ("fast", "detailed")}


def test_every_scale_study_case_is_measured() -> None:
    assert {row["case"] for row in DATA["measured"]} >= SCALE_STUDY


@pytest.mark.parametrize("row", DATA["measured"], ids=lambda r: r["case"])
def test_the_estimate_is_within_3x_in_time_and_covers_the_peak(row: dict[str, Any]) -> None:
    scenario = load_scenario(ROOT / "scenarios" / f"{row['scenario']}.yaml", row["set"])
    est = feasibility.estimate(scenario)
    assert 1 / 3 <= est.seconds / row["cpu_s"] <= 3, (est.seconds, row)
    assert est.bytes >= row["peak_mib"] * 2**20, (est.bytes, row)


def test_a_day_long_run_is_still_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """200 steps of 131,072 GPUs in detailed fidelity: beyond a day on the measured growth."""
    scenario = load_scenario(ROOT / "scenarios" / "scale-4096.yaml", [
        "parallelism.dp=2048", "parallelism.gbs=32768", "fidelity=detailed", "steps=200"])
    monkeypatch.setattr(preflight, "available_bytes", lambda: 1e15)
    with pytest.raises(feasibility.InputError, match="under 24 h"):
        feasibility.check_feasible(scenario)
