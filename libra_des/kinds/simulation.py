"""The simulation entry below the commands: one scenario in, its ``result.json`` dict out.

``libra-des run``, ``libra-des quickstart``, ``sweep.py`` and the Python API
(:func:`libra_des.api.simulate`) all run a scenario through :func:`simulate`, so nothing in the
package imports upwards into a command module. The scenario's kind (:mod:`libra_des.kinds`)
runs it; the simulators are imported inside the kinds' functions, so importing this module
stays cheap (no SimPy, no numpy work).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from libra_des import kinds
from libra_des.config import Scenario


def simulate(
    scenario: Scenario, progress: bool = False, trace_ranks: list[int] | None = None,
    want_trace: bool = False,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Run a scenario; returns (result, trace or None). Wall-clock fields: ``wall_s``."""
    rng = np.random.default_rng(scenario.seed)
    t0 = time.perf_counter()
    return kinds.kind_of(scenario).simulate(scenario, rng, t0, progress, want_trace, trace_ranks)


def elaborate_peak(scenario: Scenario) -> float:
    """Dense bf16 peak FLOP/s of the scenario's device (from its profile)."""
    from libra_des.hardware.profile import load_profile

    return float(load_profile(scenario.profile).peak_flops("bf16"))
