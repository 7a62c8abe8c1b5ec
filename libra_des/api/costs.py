"""Costs: one operation priced by the cost model ``libra-des cost`` queries.

Every function imports the hardware layer inside its body, so importing the API stays cheap.
"""

from __future__ import annotations

import math
import os
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from libra_des.api.scenarios import is_int, plain
from libra_des.errors import InputError

if TYPE_CHECKING:
    from libra_des.hardware.cost_ops import CostOp as CostOp
    from libra_des.hardware.cost_ops import CostReport as CostReport
    from libra_des.hardware.costs import CostModel as CostModel
    from libra_des.hardware.fabric.rates import Fabric
    from libra_des.hardware.profiles.profile import Profile

__all__ = [
    "CostLimits", "check_numbers", "cost", "cost_choices", "cost_limits", "cost_model",
    "cost_ops", "cost_report", "fabric_for",
]


def fabric_for(
    profile: Profile, topology: str | None, group: int, gpus_per_node: int | None
) -> Fabric:
    """The fabric of ``topology`` (or the profile's machine), grown to fit ``group`` GPUs."""
    from libra_des.hardware.fabric.topology import load_topology

    name = topology or profile.interconnect.topology
    if name is None:
        per_node = gpus_per_node or profile.interconnect.gpus_per_node
        return profile.interconnect.fabric(max(1, math.ceil(group / per_node)))
    topo = load_topology(name)
    per_node = gpus_per_node or min(group, topo.gpus_per_node)
    needed = math.ceil(group / max(per_node, 1))
    if needed > topo.nodes:
        topo = load_topology(name, {"nodes": needed})
    return topo.fabric()


def cost_model(
    profile: str | None = None,
    topology: str | None = None,
    group: int = 1,
    gpus_per_node: int | None = None,
    efficiency: bool = True,
    profile_scope: str = "own",
) -> CostModel:
    """The cost model ``libra-des cost`` queries: a profile (default H200 SXM) on a fabric.

    ``efficiency=False`` is ``--no-fit``: datasheet α-β without fitted efficiencies. A profile
    measured on another GPU than the topology's is refused unless ``profile_scope`` is
    ``borrowed``, exactly as ``run`` refuses it (:func:`cost_device_warnings`).
    """
    return checked_cost_model(profile, topology, group, gpus_per_node, efficiency,
                              profile_scope)[0]


def cost_device_warnings(profile: str | None, topology: str | None,
                         profile_scope: str) -> list[str]:
    """``run``'s device check
    (:func:`~libra_des.hardware.profiles.device_check.profile_warnings`) for a cost query:
    the named topology, else the profile's own machine (nothing to check when the profile
    names none). Raises the same one-line error as ``run`` on a refused profile."""
    from libra_des.hardware.profiles.device_check import profile_warnings
    from libra_des.hardware.profiles.profile import load_profile

    if profile_scope not in ("own", "borrowed"):
        raise InputError("profile_scope", profile_scope, "own | borrowed")
    machine = topology or load_profile(profile).interconnect.topology
    if machine is None:
        return []
    return profile_warnings(profile, profile_scope, machine, {})


def checked_cost_model(
    profile: str | None, topology: str | None, group: int, gpus_per_node: int | None,
    efficiency: bool, profile_scope: str,
) -> tuple[CostModel, list[str]]:
    """:func:`cost_model` and the device check's warnings (before any pricing)."""
    from libra_des.hardware.costs import CostModel
    from libra_des.hardware.profiles.profile import load_profile

    for name, ref in (("profile", profile), ("topology", topology)):
        if ref is not None and not isinstance(ref, str | os.PathLike):
            raise InputError(name, ref, "a shipped name or a file path")
    if not is_int(group) or group < 1:
        raise InputError("group", group, "a positive integer number of GPUs")
    if gpus_per_node is not None and (not is_int(gpus_per_node) or gpus_per_node < 1):
        raise InputError("gpus_per_node", gpus_per_node, "a positive integer")
    warnings = cost_device_warnings(profile, topology, profile_scope)
    prof = load_profile(profile)
    model = CostModel(prof, fabric_for(prof, topology, group, gpus_per_node), efficiency)
    return model, warnings


def cost_report(
    op: str,
    *,
    nbytes: float | None = None,
    group: int = 1,
    gpus_per_node: int | None = None,
    algorithm: str | None = None,
    doc_lengths: Sequence[int] | None = None,
    heads: int | None = None,
    kv_heads: int | None = None,
    head_dim: int = 128,
    cp: int = 1,
    backward: bool = False,
    gemm: tuple[int, int, int] | None = None,
    dtype: str = "bf16",
    profile: str | None = None,
    topology: str | None = None,
    efficiency: bool = True,
    profile_scope: str = "own",
) -> CostReport:
    """One operation priced as ``libra-des cost`` reports it: seconds, the ``--json`` fields
    and the printed line (:class:`~libra_des.hardware.cost_ops.CostReport`).

    ``op`` is a registered cost op (:func:`cost_ops`): a collective (``all_reduce``,
    ``all_to_all``, ...) needs ``nbytes`` (nccl-tests' size) and ``group``; ``attention``
    needs ``doc_lengths`` and ``heads``; ``gemm`` needs ``gemm=(m, n, k)``.
    """
    from libra_des.hardware import cost_ops
    from libra_des.hardware.cost_ops import CostQuery

    nbytes, group, gpus_per_node, doc_lengths, heads, kv_heads, head_dim, cp, gemm = plain(
        (nbytes, group, gpus_per_node, doc_lengths, heads, kv_heads, head_dim, cp, gemm))
    priced = cost_ops.get(op)
    model, warnings = checked_cost_model(profile, topology, group, gpus_per_node, efficiency,
                                         profile_scope)
    query = CostQuery(nbytes, group, gpus_per_node, algorithm, doc_lengths, heads, kv_heads,
                      head_dim, cp, backward, gemm, dtype)
    return cost_ops.borrowed(priced.price(model, query, op), warnings)


def cost(op: str, **arguments: Any) -> float:
    """Seconds of one operation, as ``libra-des cost --json`` reports them (the arguments of
    :func:`cost_report`; for the chosen algorithm or bus bandwidth use it or
    :func:`cost_model`)."""
    return cost_report(op, **arguments).seconds


def cost_ops() -> tuple[CostOp, ...]:
    """The registered cost ops, in ``libra-des cost --op``'s order."""
    from libra_des.hardware import cost_ops as registry

    return registry.REGISTRY.items()


def cost_choices() -> dict[str, tuple[str, ...]]:
    """The names ``libra-des cost`` offers: ops, collective algorithms and GEMM dtypes."""
    from libra_des.hardware.collectives.curves import ALGORITHMS
    from libra_des.hardware.profiles.profile import DTYPE_BYTES

    return {"op": tuple(o.name for o in cost_ops()), "algorithm": ALGORITHMS,
            "dtype": tuple(DTYPE_BYTES)}


@dataclass(frozen=True)
class CostLimits:
    """The largest group and token count a cost query accepts (the scenario limits)."""

    gpus: int
    tokens: int


def cost_limits() -> CostLimits:
    """The scenario validation's limits, which ``libra-des cost`` applies to its flags too."""
    from libra_des.config.validation import MAX_GPUS, MAX_TOKENS

    return CostLimits(MAX_GPUS, MAX_TOKENS)


def check_numbers(values: MutableMapping[str, Any]) -> None:
    """Raise :class:`~libra_des.errors.CheckError` on a non-finite or negative figure in
    ``values`` (the results' plausibility check: such an answer is a bug, never printed);
    rounding noise at a bound is set to the bound in ``values`` itself."""
    from libra_des.results.plausibility import check_numbers as check

    check(values)
