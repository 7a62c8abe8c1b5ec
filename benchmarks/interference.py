"""The interference model against public overlap measurements, and what it moves.

1. Every row of ``calibration/public/interference.yaml`` that states a measured slowdown is
   predicted by ``libra_des/hardware/compute/interference.py`` in both of its forms: the many-wave
   ``S / (S - s)`` and the wave-quantised ``ceil(T / (S - s)) / ceil(T / S)`` (the row gives
   the GEMM's CTAs ``T``); the relative error of each is printed.
2. ``--scenarios``: every shipped scenario at the golden (reduced) size, ``overlap.interference``
   off and on: step (or prefill) time, its change, and the interference cost per overlap point.

    .venv/bin/python benchmarks/interference.py [--scenarios] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from libra_des.hardware.compute.interference import OverlapModel, wave_slowdown

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "calibration" / "public" / "interference.yaml"


def compare() -> list[dict[str, Any]]:
    """Model against every measured slowdown of the table."""
    rows = yaml.safe_load(TABLE.read_text())["slowdowns"]
    out = []
    for r in rows:
        model = OverlapModel(sms=int(r["sms"]), channels=int(r["collective_ctas"]))
        many = model.sm_factor()
        wave = wave_slowdown(int(r["kernel_ctas"]), int(r["sms"]), int(model.sms_taken()))
        measured = float(r["slowdown"])
        out.append({"id": r["id"], "measured": measured, "many_wave": many, "wave": wave,
                    "error_many_wave": many / measured - 1.0, "error_wave": wave / measured - 1.0})
    return out


def moves() -> list[dict[str, Any]]:
    """Golden-size results of every shipped scenario, interference off and on."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_scenarios import reduced

    from libra_des.config import load_scenario
    from libra_des.kinds.simulation import simulate

    out = []
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        base = reduced(path)
        off, _ = simulate(load_scenario(path, base))
        on, _ = simulate(load_scenario(path, [*base, "overlap.interference=on"]))
        key = "step_time_s" if "step_time_s" in off else "prefill_s"
        a = off[key]["mean"] if key == "step_time_s" else off[key]
        b = on[key]["mean"] if key == "step_time_s" else on[key]
        out.append({"scenario": path.stem, "metric": key, "off": a, "on": b,
                    "change": b / a - 1.0, "interference": on.get("interference")})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", action="store_true", help="also the shipped scenarios")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args()
    table = compare()
    for r in table:
        print(f"{r['id']}: measured {r['measured']:.3f}x; model many-wave {r['many_wave']:.3f}x "
              f"({r['error_many_wave']:+.1%}), wave-quantised {r['wave']:.3f}x "
              f"({r['error_wave']:+.1%})")
    found: dict[str, Any] = {"public": table}
    if args.scenarios:
        found["scenarios"] = moves()
        for m in found["scenarios"]:
            cost = m["interference"] or {}
            print(f"{m['scenario']}: {m['metric']} {m['off']:.6g} -> {m['on']:.6g} "
                  f"({m['change']:+.2%}); compute slowdown "
                  f"{cost.get('compute_slowdown_s', 0.0):.3g} s")
    if args.json:
        args.json.write_text(json.dumps(found, indent=1) + "\n")


if __name__ == "__main__":
    main()
