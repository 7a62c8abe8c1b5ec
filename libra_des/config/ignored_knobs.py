"""Variance knobs the run would ignore: refused as bad input (``VarianceSpec``'s check).

A variance source acts only when its rate, fraction or spread is on; its length, factor or
correlation alone changes nothing (hardware/variance/model.py, fleet_variance.py and
link_host_variance.py read them so), and under ``enabled: false`` no knob acts at all.
"""

from __future__ import annotations

from typing import Any

from libra_des.config.validation import fields_of
from libra_des.errors import InputError

#: A variance knob and the knob that must be on for it to act: ``(knob, switch)``; a knob
#: listed twice acts when either switch is on. A knob whose switches are all off is ignored
#: by the run (hardware/variance/model.py, fleet_variance.py, link_host_variance.py read them
#: so), which is bad input.
VARIANCE_SWITCHES = (
    ("slow_factor", "slow_gpu_fraction"),
    ("degraded_link_factor", "degraded_link_fraction"),
    ("failslow_steps", "failslow_rate"), ("failslow_factor", "failslow_rate"),
    ("node_episode_steps", "node_episode_rate"), ("node_episode_factor", "node_episode_rate"),
    ("rack_episode_steps", "rack_episode_rate"), ("rack_episode_factor", "rack_episode_rate"),
    # Racks group nodes for rack episodes and for the links' rack-correlated jitter.
    ("rack_nodes", "rack_episode_rate"), ("rack_nodes", "link_jitter_correlation"),
    ("link_episode_steps", "link_episode_rate"), ("link_episode_factor", "link_episode_rate"),
    ("link_jitter_correlation", "link_jitter_sigma"),
    ("host_stall_seconds", "host_stall_rate"),
    ("jitter_node_correlation", "noise_sigma"),
)


def ignored_variance_knob(spec: Any) -> None:
    """Refuse a variance knob the run would ignore: any knob under ``enabled: false``, or a
    length, factor or correlation whose rate, fraction or spread is explicitly zero (or, for
    the structured sources, left unset without ``fleet: true``, which keeps them off).

    A knob counts as set when its value differs from its default, so a full dump of a
    scenario (every field present) is judged like the file it came from."""
    fields = fields_of(type(spec))
    changed = [n for n, f in fields.items() if getattr(spec, n) != f.default]
    if not spec.enabled:
        others = [n for n in changed if n != "enabled"]
        if others:
            raise InputError(others[0], getattr(spec, others[0]),
                             "nothing while variance.enabled is false (the run has no noise)")
        return
    for knob in dict.fromkeys(k for k, _ in VARIANCE_SWITCHES):
        switches = [s for k, s in VARIANCE_SWITCHES if k == knob]
        if knob in changed and all(switch_is_off(spec, s) for s in switches):
            states = ", ".join(f"variance.{s}={getattr(spec, s)!r}" for s in switches)
            raise InputError(knob, getattr(spec, knob),
                             f"only when {' or '.join('variance.' + s for s in switches)} is on "
                             f"(here {states})")


def switch_is_off(spec: Any, switch: str) -> bool:
    """Whether the rate, fraction or spread ``switch`` leaves its source off: zero, or unset
    where unset means off (a structured source without ``fleet: true``; the calibrated
    sources, ``noise_sigma`` and ``failslow_rate``, are on when unset)."""
    value = getattr(spec, switch)
    if value is None:
        return switch not in ("noise_sigma", "failslow_rate") and not spec.fleet
    return bool(value == 0)
