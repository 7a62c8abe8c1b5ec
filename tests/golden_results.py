"""Golden results: each shipped scenario's ``result.json`` at a reduced size, kept in the repo.

Why: refactors (registries, kind-scoped scenarios, one network layer) must not change
results. ``tests/test_golden.py`` re-simulates every scenario at the size
``test_scenarios.reduced`` gives (its own policy, its own seed) and compares with
``tests/golden/<scenario>.json``: integers and text exactly, floats to 1e-12 relative (the
model's results are byte-identical run to run; the tolerance only absorbs a different CPU's
last-bit libm differences). A change that moves results *on purpose* regenerates the files
and says so in its commit:

    .venv/bin/python tests/golden_results.py        # rewrite tests/golden/*.json

``tests/golden/free-overlap/`` holds every scenario run with ``overlap.interference=off``
(free overlap, the model before compute-communication interference). When interference was
added, this set was the earlier goldens unchanged, which showed that ``off`` reproduces them
exactly. It is regenerated together with the main set, by the same command, and only when a
change of another mechanism moves results on purpose; a change that moves only this set
changed the free-overlap path by mistake. Only the scenario dump's ``overlap`` key differs from
a run with the knob left out.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden"
FREE_OVERLAP = GOLDEN / "free-overlap"
#: Fields that describe the machine, not the model: the wall clock (older results) and the
#: installed versions (the lock pins them, but Python's patch release differs between hosts).
VOLATILE = ("wall_s", "versions")


def golden_result(path: Path, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """The scenario's reduced-size result (``extra``: further ``--set`` overrides), wall-clock
    fields removed, as plain JSON data."""
    sys.path.insert(0, str(HERE))
    from test_scenarios import reduced

    from libra_des.config import load_scenario
    from libra_des.kinds.simulation import simulate

    result, _ = simulate(load_scenario(path, [*reduced(path), *extra]))
    clean = {k: v for k, v in result.items() if k not in VOLATILE}
    data: dict[str, Any] = json.loads(json.dumps(clean))
    return data


def differences(want: Any, got: Any, where: str = "") -> list[str]:
    """Paths at which ``got`` differs from ``want`` (floats to 1e-12 relative)."""
    if isinstance(want, dict) and isinstance(got, dict):
        out = [f"{where}.{k}: missing" for k in want if k not in got]
        out += [f"{where}.{k}: new key" for k in got if k not in want]
        for key in want.keys() & got.keys():
            out += differences(want[key], got[key], f"{where}.{key}")
        return out
    if isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            return [f"{where}: length {len(got)} != {len(want)}"]
        return [d for i, (a, b) in enumerate(zip(want, got, strict=True))
                for d in differences(a, b, f"{where}[{i}]")]
    if isinstance(want, float) and isinstance(got, float):
        same = math.isclose(want, got, rel_tol=1e-12, abs_tol=1e-300)
        return [] if same else [f"{where}: {got!r} != {want!r}"]
    return [] if want == got and type(want) is type(got) else [f"{where}: {got!r} != {want!r}"]


def main() -> None:
    from libra_des.config import ROOT

    GOLDEN.mkdir(exist_ok=True)
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        data = golden_result(path)
        (GOLDEN / f"{path.stem}.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        free = golden_result(path, ("overlap.interference=off",))
        free["scenario"].pop("overlap")
        FREE_OVERLAP.mkdir(exist_ok=True)
        (FREE_OVERLAP / f"{path.stem}.json").write_text(
            json.dumps(free, indent=1, sort_keys=True) + "\n")
        print(f"wrote tests/golden/{path.stem}.json and free-overlap/{path.stem}.json")


if __name__ == "__main__":
    main()
