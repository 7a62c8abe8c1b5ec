"""Whether a scenario's profile was measured on the GPU its topology describes.

A profile holds one device's kernel and collective measurements; priced on another GPU its
numbers are someone else's. Rules:

- a profile named by the scenario whose GPU family (``H200``, ``A100``, ``CPU``, ...) differs
  from the topology's ``gpu`` is refused (one line, exit 2) unless the scenario sets
  ``profile_scope: borrowed``; the result then carries a warning;
- with no profile named, the shipped default (H200 SXM datasheet) is used; on a topology of
  another GPU it is borrowed implicitly and the result says so (our choice: scenarios that
  never named a profile keep running as before, but no longer silently).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from libra_des.hardware.fabric.topology_spec import merge_params, parse_spec, read_spec
from libra_des.hardware.profiles.profile import (
    DEFAULT_PROFILE,
    Profile,
    check_device,
    load_profile,
)


def topology_gpu(topology: str | Mapping[str, Any], params: Mapping[str, Any]) -> str:
    """The ``gpu`` of a topology (a shipped name, a path or a mapping) after ``params``."""
    raw = dict(topology) if isinstance(topology, Mapping) else read_spec(topology)
    return parse_spec(merge_params(raw, params)).gpu


def profile_warnings(profile: str | Mapping[str, Any] | None, scope: str,
                     topology: str | Mapping[str, Any], params: Mapping[str, Any],
                     loaded: Profile | None = None) -> list[str]:
    """Warnings for the result (empty when the devices match); raises on a refused profile.
    ``loaded``: ``profile`` already loaded (a run loads it once)."""
    gpu = topology_gpu(topology, params)
    ref = profile if isinstance(profile, str) else ("(inline)" if profile else DEFAULT_PROFILE)
    if profile is None:
        scope = "borrowed"
    warning = check_device(load_profile(profile) if loaded is None else loaded, gpu, scope, ref)
    return [warning] if warning else []
