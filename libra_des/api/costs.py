"""Costs: one operation priced by the cost model ``libra-des cost`` queries.

Every function imports the hardware layer inside its body, so importing the API stays cheap.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from libra_des.api.scenarios import is_int
from libra_des.errors import InputError

if TYPE_CHECKING:
    from libra_des.hardware.cost_ops import CostOp as CostOp
    from libra_des.hardware.cost_ops import CostReport as CostReport
    from libra_des.hardware.costs import CostModel as CostModel
    from libra_des.hardware.fabric import Fabric
    from libra_des.hardware.profile import Profile

__all__ = [
    "CostLimits", "check_numbers", "cost", "cost_choices", "cost_limits", "cost_model",
    "cost_ops", "cost_report", "fabric_for",
]


def fabric_for(
    profile: Profile, topology: str | None, group: int, gpus_per_node: int | None
) -> Fabric:
    """The fabric of ``topology`` (or the profile's machine), grown to fit ``group`` GPUs."""
    from libra_des.hardware.topology import load_topology

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
) -> CostModel:
    """The cost model ``libra-des cost`` queries: a profile (default H200 SXM) on a fabric.

    ``efficiency=False`` is ``--no-fit``: datasheet α-β without fitted efficiencies.
    """
    from libra_des.hardware.costs import CostModel
    from libra_des.hardware.profile import load_profile

    for name, ref in (("profile", profile), ("topology", topology)):
        if ref is not None and not isinstance(ref, str | os.PathLike):
            raise InputError(name, ref, "a shipped name or a file path")
    if not is_int(group) or group < 1:
        raise InputError("group", group, "a positive integer number of GPUs")
    if gpus_per_node is not None and (not is_int(gpus_per_node) or gpus_per_node < 1):
        raise InputError("gpus_per_node", gpus_per_node, "a positive integer")
    prof = load_profile(profile)
    return CostModel(prof, fabric_for(prof, topology, group, gpus_per_node), efficiency)


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
) -> CostReport:
    """One operation priced as ``libra-des cost`` reports it: seconds, the ``--json`` fields
    and the printed line (:class:`~libra_des.hardware.cost_ops.CostReport`).

    ``op`` is a registered cost op (:func:`cost_ops`): a collective (``all_reduce``,
    ``all_to_all``, ...) needs ``nbytes`` (nccl-tests' size) and ``group``; ``attention``
    needs ``doc_lengths`` and ``heads``; ``gemm`` needs ``gemm=(m, n, k)``.
    """
    from libra_des.hardware import cost_ops
    from libra_des.hardware.cost_ops import CostQuery

    priced = cost_ops.get(op)
    model = cost_model(profile, topology, group, gpus_per_node, efficiency)
    query = CostQuery(nbytes, group, gpus_per_node, algorithm, doc_lengths, heads, kv_heads,
                      head_dim, cp, backward, gemm, dtype)
    return priced.price(model, query, op)


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
    from libra_des.hardware.collectives import ALGORITHMS
    from libra_des.hardware.profile import DTYPE_BYTES

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


def check_numbers(values: Mapping[str, Any]) -> None:
    """Raise :class:`~libra_des.errors.CheckError` on a non-finite or negative figure in
    ``values`` (the results' plausibility check: such an answer is a bug, never printed)."""
    from libra_des.results.plausibility import check_numbers as check

    check(values)
