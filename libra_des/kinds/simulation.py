"""The simulation entry below the commands: one scenario in, its ``result.json`` dict out.

``libra-des run``, ``libra-des quickstart``, ``sweep.py`` and the Python API
(:func:`libra_des.api.simulate`) all run a scenario through :func:`simulate`, so nothing in the
package imports upwards into a command module. The scenario's kind (:mod:`libra_des.kinds`)
runs it; the simulators are imported inside the kinds' functions, so importing this module
stays cheap (no SimPy, no numpy work).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

import libra_des.kinds as kinds
from libra_des.config import Scenario

if TYPE_CHECKING:
    from libra_des.hardware.profiles.profile import Profile

#: Fields that measure this machine, not the model: they go to ``run.json``, never to
#: ``result.json`` (which is then byte-identical run to run).
WALL_CLOCK_FIELDS = ("wall_s", "cpu_sharding_wall_s")


def simulate(
    scenario: Scenario, progress: bool = False, trace_ranks: list[int] | None = None,
    want_trace: bool = False,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Run a scenario; returns (result, trace or None): the result holds no wall-clock field."""
    result, trace, _ = simulate_timed(scenario, progress, trace_ranks, want_trace)
    return result, trace


def simulate_timed(
    scenario: Scenario, progress: bool = False, trace_ranks: list[int] | None = None,
    want_trace: bool = False, elaborated: bool = False,
) -> tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any]]:
    """:func:`simulate` plus the run's wall-clock record (``wall_s``, ...: ``run.json``).

    ``elaborated``: the caller vouches that ``scenario`` is its kind's ``elaborate`` output
    (a sweep's point, elaborated when the sweep was resolved and sent to a worker process,
    where :func:`~libra_des.kinds.elaborated` cannot recognise it); else it is elaborated
    here unless this process elaborated it already.

    The result records the versions that produced it (:func:`~libra_des.base.identity.versions`).
    A profile measured on another GPU than the topology's is refused before any work unless
    borrowed; a borrowed one puts ``warnings`` in the result
    (``hardware/profiles/device_check.py``).
    """
    from libra_des.base.identity import versions
    from libra_des.hardware.profiles.device_check import profile_warnings
    from libra_des.hardware.profiles.profile import load_profile

    kind = kinds.kind_of(scenario)
    if not elaborated:
        scenario = kinds.elaborated(scenario)  # the names only registries above the config see
    profile = load_profile(scenario.profile)  # loaded once: the run, its peak and its band
    warnings = profile_warnings(scenario.profile, scenario.profile_scope, scenario.topology,
                                scenario.topology_params, profile)
    rng = np.random.default_rng(scenario.seed)
    t0 = time.perf_counter()
    result, trace = kind.simulate(scenario, profile, rng, t0, progress, want_trace, trace_ranks)
    if warnings:
        result["warnings"] = [*result.get("warnings", []), *warnings]
    result["model_uncertainty"] = uncertainty(scenario, result, profile)
    timing = {k: result.pop(k) for k in WALL_CLOCK_FIELDS if k in result}
    result["versions"] = versions()
    return result, trace, timing


def uncertainty(scenario: Scenario, result: dict[str, Any], profile: Profile) -> dict[str, Any]:
    """``model_uncertainty``: the profile's CV errors spread over the run's time
    (:mod:`libra_des.results.uncertainty`)."""
    from libra_des.results.uncertainty import model_band

    return model_band(result, profile, scenario.profile_scope == "borrowed")


def run_record(timing: dict[str, Any], files: list[str]) -> dict[str, Any]:
    """``run.json``: what a run measured of this machine and the files it wrote (a rerun
    removes only stale files listed here: never one it did not write)."""
    from libra_des.base.identity import host

    return {**timing, "host": host(), "files": sorted(files)}
