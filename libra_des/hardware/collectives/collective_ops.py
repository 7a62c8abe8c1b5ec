"""The collective-op registry: what the cost models need to know about each op, by name.

Every place that used to branch on an op's name (bus-bandwidth factors, how an op decomposes
over fabric levels, which ops may borrow each other's curves, which ops NCCL's tuner prices)
reads an :class:`CollectiveOp` from :data:`REGISTRY` instead (the project's one plug-in
registry, :mod:`libra_des.registry`). A new op is one more registered entry.

Per op (sizes follow nccl-tests' ``size``, see :mod:`libra_des.hardware.collectives.curves`):

- ``busbw(n)``: nccl-tests' bus-bandwidth factor, busbw = algbw * factor;
- ``nccl_steps(n)``: the step count NCCL's tuner converts a ring's bus bandwidth with
  (all_reduce 2(n-1), all_gather / reduce_scatter n-1, else n; ``tuning.cc``);
- ``nccl_algorithms``: the NCCL algorithms that implement it (``tuning.cc`` skips the
  others); empty for point-to-point exchanges, which NCCL does not tune;
- ``levels``: how it decomposes over fabric levels
(:mod:`libra_des.hardware.collectives.hierarchy`):
  ``reduce`` (reduce-scatter up, all-reduce at the top, all-gather down), ``scatter`` (the
  going-up half), ``gather`` (the coming-down half), ``down`` (the whole buffer per level,
  top first: broadcast), ``up`` (the whole buffer per level, bottom first: reduce), ``none``;
- ``ring_factor``: bytes a member sends per byte of its share in one ring step series (2 for
  an all-reduce's two halves);
- ``node_floor``: spanning nodes never removes the single-node collective's work;
- ``borrow``: ops whose curves it may borrow (most similar first).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from libra_des.registry import Registry


def part(n: int) -> float:
    return (n - 1) / n if n > 1 else 1.0


@dataclass(frozen=True)
class CollectiveOp:
    """One collective op's facts (module docstring)."""

    name: str
    busbw: Callable[[int], float]
    nccl_steps: Callable[[int], int]
    nccl_algorithms: tuple[str, ...]
    levels: str
    ring_factor: float = 1.0
    node_floor: bool = False
    borrow: tuple[str, ...] = ()

    @property
    def pairwise(self) -> bool:
        """Point-to-point exchanges (send/recv, all-to-all): priced message by message."""
        return not self.nccl_algorithms

    @property
    def composes(self) -> bool:
        """Whether the op has a hierarchical (node, network) form."""
        return self.levels != "none"


RING_ONLY = ("ring",)
GATHERS = ("ring", "pat", "nvls", "collnet_direct")

SHIPPED = (
    CollectiveOp(
        "all_reduce", lambda n: 2 * part(n), lambda n: 2 * (n - 1),
        ("ring", "tree", "nvls", "nvls_tree", "collnet_direct", "collnet_chain"), "reduce",
        2.0, True, ("reduce_scatter", "all_gather", "broadcast", "all_to_all", "send_recv"),
    ),
    CollectiveOp(
        "all_gather", part, lambda n: n - 1, GATHERS, "gather", 1.0, True,
        ("reduce_scatter", "all_reduce", "broadcast", "all_to_all", "send_recv"),
    ),
    CollectiveOp(
        "reduce_scatter", part, lambda n: n - 1, GATHERS, "scatter", 1.0, True,
        ("all_gather", "all_reduce", "broadcast", "all_to_all", "send_recv"),
    ),
    CollectiveOp(
        "broadcast", lambda n: 1.0, lambda n: n, RING_ONLY, "down", 1.0, True,
        ("all_gather", "reduce_scatter", "all_reduce", "send_recv", "all_to_all"),
    ),
    CollectiveOp(
        "reduce", lambda n: 1.0, lambda n: n, RING_ONLY, "up", 1.0, True,
        ("broadcast", "reduce_scatter", "all_gather", "all_reduce", "send_recv", "all_to_all"),
    ),
    CollectiveOp(
        "send_recv", lambda n: 1.0, lambda n: 1, (), "none", 1.0, False,
        ("all_to_all", "broadcast", "all_gather", "reduce_scatter", "all_reduce"),
    ),
    CollectiveOp(
        "all_to_all", part, lambda n: n - 1, (), "none", 1.0, False,
        ("send_recv", "all_gather", "reduce_scatter", "broadcast", "all_reduce"),
    ),
)


def load_ops(registry: Registry[CollectiveOp]) -> None:
    for op in SHIPPED:
        registry.register(op)


#: The process's registry (a plug-in registry is the one piece of module state by design).
REGISTRY: Registry[CollectiveOp] = Registry("collective op", "op", load_ops)
get: Callable[[str], CollectiveOp] = REGISTRY.get
register = REGISTRY.register
names = REGISTRY.names
