"""How a collective decomposes over the fabric's levels (the shape only; pricing is in
:mod:`libra_des.hardware.collectives.communication`).

A group of ``n`` ranks packed ``gpn`` per node, starting on a unit boundary, has ``k_0 = gpn``
members in its node and, at each switch level ``l``, ``k_l`` units of the level below inside
one unit of level ``l`` (the last level takes what is left, so ``prod k_l >= n``). With
``S_l = S / (k_0 ... k_{l-1})`` (the share each rank still holds on entering level ``l``):

- all_reduce: reduce-scatter of ``S_l`` at every level below the top, going up; all-reduce of
  ``S_top`` at the top; all-gather of ``S_l`` at every level below the top, coming down.
  Level 0's two halves are kept as one step (a measured intra-node all-reduce prices them);
- reduce_scatter: the going-up half; all_gather: the coming-down half (top level first);
- broadcast: the whole ``S`` at every level, top first.

Per rank, the ring form of these steps moves ``sum_l 2 (k_l - 1)/k_l S_l = 2 (n - 1)/n S``
bytes for an all-reduce of ``n = prod k_l`` ranks: the same bytes as one flat ring, moved
over cheaper links lower down (a telescoping sum). Two levels (node, network) give NCCL's
hierarchical collective; ``multilevel`` uses every switch level of the fabric.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from libra_des.hardware.collectives import collective_ops
from libra_des.hardware.fabric.rates import Fabric


@dataclass(frozen=True)
class Step:
    """One phase of a decomposed collective: ``op`` among ``ranks`` members of ``level``
    on ``1/divisor`` of the collective's size; ``span``: nodes those members cover (the
    unit whose links carry it; 0 inside a node)."""

    level: int
    op: str
    ranks: int
    divisor: int
    span: int

    @property
    def name(self) -> str:
        return f"level {self.level} {self.op}"


def level_ranks(fabric: Fabric, n: int, gpn: int, every_level: bool) -> list[tuple[int, int]]:
    """``[(k_l, span_l)]`` of a group (module docstring): the node, then either the network
    as one level (``every_level`` False, NCCL's hierarchy) or each switch level whose unit
    is smaller than the group, then the rest."""
    nodes = math.ceil(n / gpn)
    out = [(gpn, 0)]
    below = 1
    if every_level:
        for span, _ in fabric.tiers or ((fabric.leaf_nodes, fabric.oversubscription),):
            if span <= 0 or span >= nodes:
                break
            out.append((max(span // below, 1), span))
            below = span
    out.append((math.ceil(nodes / below), nodes))
    return out


def decompose(op: str, levels: list[tuple[int, int]]) -> list[Step]:
    """The steps of ``op`` over ``levels`` (module docstring; the op's ``levels`` rule from
    :mod:`~libra_des.hardware.collectives.collective_ops`), in execution order; levels with one
    member are
    skipped (nothing to exchange), level 0 never (it may hold a measured curve that prices
    both halves)."""
    divisors = [math.prod(k for k, _ in levels[:i]) for i in range(len(levels))]
    steps = [Step(i, op, k, d, s) for i, ((k, s), d) in enumerate(zip(levels, divisors,
                                                                          strict=True))]
    top, lower = steps[-1], [s for s in steps[:-1] if s.level == 0 or s.ranks > 1]
    return RULES[collective_ops.get(op).levels](top, lower)


def reduce_rule(top: Step, lower: list[Step]) -> list[Step]:
    """Reduce-scatter going up, all-reduce at the top, all-gather coming down."""
    up = [with_op(s, "reduce_scatter") for s in lower[1:]]
    down = [with_op(s, "all_gather") for s in reversed(lower[1:])]
    return [with_op(lower[0], "all_reduce"), *up, top, *down]


def whole(top: Step, lower: list[Step], order: list[Step]) -> list[Step]:
    return [Step(s.level, top.op, s.ranks, 1, s.span) for s in order]


RULES: dict[str, Callable[[Step, list[Step]], list[Step]]] = {
    "reduce": reduce_rule,
    "scatter": lambda top, lower: [*lower, top],
    "gather": lambda top, lower: [top, *reversed(lower)],
    "down": lambda top, lower: whole(top, lower, [top, *reversed(lower)]),
    "up": lambda top, lower: whole(top, lower, [*lower, top]),
}


def with_op(step: Step, op: str) -> Step:
    return Step(step.level, op, step.ranks, step.divisor, step.span)


def bytes_per_rank(steps: list[Step], size: float) -> float:
    """Bytes one rank sends over all ``steps`` in their ring form (conservation check).

    Level 0's all_reduce step stands for its reduce-scatter and all-gather halves; an op
    moving the whole buffer per level (``down`` / ``up``) sends it once per level."""
    total = 0.0
    for s in steps:
        op = collective_ops.get(s.op)
        share = size / s.divisor
        whole_buffer = op.levels in ("down", "up")
        frac = (1.0 - (s.ranks == 1)) if whole_buffer else (s.ranks - 1) / s.ranks
        total += op.ring_factor * frac * share
    return total
