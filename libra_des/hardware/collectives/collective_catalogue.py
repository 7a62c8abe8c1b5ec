"""One catalogue of collective algorithms: each gives its alpha-beta shape and its transfer DAG.

An :class:`Algorithm` entry answers two questions about one (op, algorithm) pair:

- ``shape(n) -> (volume per rank per byte of size, latency steps)``: what the analytic cost
  model (:mod:`libra_des.hardware.collectives.communication`) times with a fitted curve;
- ``dag(ranks, nbytes, send_bytes, chunks)``: the point-to-point transfers the algorithm is
  made of and, for each, the transfers it waits for, which the flow model
  (:mod:`libra_des.sim.network.flow.flow_model`) runs on the topology. ``None`` where the
  algorithm is not a set of GPU-to-GPU transfers in our topology model (NVLS reduces inside
  the switch) or has no DAG yet (tree).

The two agree by construction, and ``tests/test_collective_catalogue.py`` checks it: the
busiest rank of an algorithm's DAG sends exactly ``volume * size`` bytes and the DAG's longest
dependency chain is ``steps`` transfers long (one chunk), for every op, algorithm, group size
and size. Sizes follow nccl-tests' ``size`` (see :mod:`libra_des.hardware.collectives.curves`).

Pure data and functions (no SimPy). Ranks are GPU ids (any distinct integers); a DAG is
``(transfers, deps)`` with ``transfers[i] = (src, dst, bytes)`` and ``deps[i]`` the indices of
the transfers ``i`` waits for.

DAGs (assumptions stated once): ring all_reduce is 2(n-1) steps of ``S/n`` to the next rank,
ring all_gather and reduce_scatter n-1 such steps; in a ring, rank r starts step k+1 once its
own step-k send is done and it has received step k from rank r-1 (the data it forwards). A
group spanning nodes with the same number of members ``g`` on each runs ``g`` such rings in
parallel on ``1/g`` of the data each (:func:`rail_rings`: one channel per rail, as NCCL opens
one ring per NIC), which is the rate the alpha-beta ring assumes
(:func:`~libra_des.hardware.collectives.curves.flat_rate`).
Ring broadcast is a pipelined chain (``chunks`` pieces forwarded rank to rank; across nodes
one per rail ring, each from the root on its share of the buffer). Direct
exchanges send every peer its share at once: all_to_all(v) ``send_bytes[i, j]`` from rank i
to j (uniform ``S/n`` per pair without a matrix; the diagonal stays local), all_gather each
rank's ``S/n`` shard to every peer, reduce_scatter every peer's ``S/n`` shard to it, all_reduce
a direct reduce_scatter then a direct all_gather (a rank sends its reduced shard once it has
received every peer's part of it), broadcast the root sending ``S`` to every peer; send_recv
is one transfer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from libra_des.errors import InputError
from libra_des.hardware.collectives.hierarchy import Step

#: Transfers ``(src, dst, bytes)`` and, per transfer, the indices of those it waits for.
Dag = tuple[list[tuple[int, int, float]], list[list[int]]]
#: ``(ranks, nbytes, send_bytes, chunks, gpus_per_node) -> Dag``
DagBuilder = Callable[[list[int], float, np.ndarray | None, int, int], Dag]


def log2_steps(n: int) -> int:
    return max(1, math.ceil(math.log2(n))) if n > 1 else 0


def part(n: int) -> float:
    return (n - 1) / n


def ring(
    ranks: list[int], chunk: float, steps: int
) -> tuple[list[tuple[int, int, float]], list[list[int]]]:
    """``steps`` rounds in which rank r sends ``chunk`` to rank r+1 (index k*n + r)."""
    n = len(ranks)
    transfers = [(ranks[r], ranks[(r + 1) % n], chunk) for _ in range(steps) for r in range(n)]
    deps = [
        [] if k == 0 else [(k - 1) * n + r, (k - 1) * n + (r - 1) % n]
        for k in range(steps)
        for r in range(n)
    ]
    return transfers, deps


def rail_rings(ranks: list[int], gpus_per_node: int) -> list[list[int]]:
    """Orders of the parallel rings of a ring collective (module docstring).

    Members are grouped by node (GPU ``r`` on node ``r // gpus_per_node``), nodes in order of
    first appearance. Ring ``c`` walks each node's members starting at its ``c``-th, forwards
    on even nodes and backwards on odd ones, so it leaves a node from the GPU whose rail it
    enters the next node on (all but the closing hop of an odd number of nodes). A group
    inside one node, or with uneven nodes, is one ring in the given order.
    """
    if gpus_per_node <= 0:
        return [ranks]
    nodes: dict[int, list[int]] = {}
    for r in ranks:
        nodes.setdefault(r // gpus_per_node, []).append(r)
    blocks = list(nodes.values())
    width = len(blocks[0])
    if len(blocks) == 1 or width == 1 or any(len(b) != width for b in blocks):
        return [ranks]
    orders = []
    for c in range(width):
        order: list[int] = []
        for k, block in enumerate(blocks):
            forward = block[c:] + block[:c]
            order += forward if k % 2 == 0 else forward[::-1]
        orders.append(order)
    return orders


def parallel(dags: list[Dag]) -> Dag:
    """Independent DAGs side by side (indices renumbered)."""
    transfers: list[tuple[int, int, float]] = []
    deps: list[list[int]] = []
    for t, d in dags:
        first = len(transfers)
        transfers += t
        deps += [[j + first for j in before] for before in d]
    return transfers, deps


def rings(orders: list[list[int]], nbytes: float, steps: int) -> Dag:
    """Parallel rings, one per order, sharing ``nbytes`` equally (``nbytes/(n*rings)`` per
    transfer)."""
    chunk = nbytes / (len(orders[0]) * len(orders))
    return parallel([ring(order, chunk, steps) for order in orders])


def chains(orders: list[list[int]], root: int, nbytes: float, chunks: int) -> Dag:
    """Parallel pipelined chains from ``root``, one along each ring order (rotated to start
    at the root), each carrying ``1/len(orders)`` of the buffer."""
    share = nbytes / len(orders)
    starts = [order.index(root) for order in orders]
    return parallel([chain(order[i:] + order[:i], share, chunks)
                     for order, i in zip(orders, starts, strict=True)])


def chain(
    ranks: list[int], nbytes: float, chunks: int
) -> tuple[list[tuple[int, int, float]], list[list[int]]]:
    """Pipelined broadcast along ``ranks``: chunk c crosses hop h after c on h-1, c-1 on h."""
    hops = len(ranks) - 1
    transfers = [
        (ranks[h], ranks[h + 1], nbytes / chunks) for c in range(chunks) for h in range(hops)
    ]
    deps: list[list[int]] = []
    for c in range(chunks):
        for h in range(hops):
            i = c * hops + h
            deps.append(([i - 1] if h > 0 else []) + ([i - hops] if c > 0 else []))
    return transfers, deps


def direct_pairs(
    ranks: list[int], nbytes: float, send_bytes: np.ndarray | None
) -> tuple[list[tuple[int, int, float]], list[list[int]]]:
    """All-to-all(v): every ordered pair at once; uniform ``nbytes / n`` per pair if no matrix."""
    n = len(ranks)
    if send_bytes is None:
        matrix = np.full((n, n), nbytes / n)
    else:
        matrix = np.asarray(send_bytes, dtype=float)
        if matrix.shape != (n, n) or (matrix < 0).any():
            raise InputError("send_bytes", matrix.shape, f"a non-negative {n}x{n} matrix")
    transfers = [
        (ranks[i], ranks[j], float(matrix[i, j]))
        for i in range(n)
        for j in range(n)
        if i != j and matrix[i, j] > 0
    ]
    return transfers, [[] for _ in transfers]


def direct_all_reduce(ranks: list[int], nbytes: float) -> Dag:
    """Direct reduce_scatter (rank i receives every peer's part of shard i), then direct
    all_gather (rank i sends its reduced shard to every peer once all its parts arrived)."""
    n = len(ranks)
    scatter, _ = direct_pairs(ranks, nbytes, None)
    into: dict[int, list[int]] = {r: [] for r in ranks}
    for k, (_, dst, _) in enumerate(scatter):
        into[dst].append(k)
    gather = [(ranks[i], ranks[j], nbytes / n) for i in range(n) for j in range(n) if i != j]
    return scatter + gather, [[] for _ in scatter] + [into[src] for src, _, _ in gather]


def send_recv(ranks: list[int], nbytes: float) -> Dag:
    if len(ranks) != 2:
        raise InputError("gpus", ranks, "exactly two GPUs [src, dst] for send_recv")
    return [(ranks[0], ranks[1], nbytes)], [[]]


def reduce_chain(ranks: list[int], nbytes: float, chunks: int) -> Dag:
    """Pipelined ring reduce to the root (``ranks[0]``): a chain from the last rank to the
    root, each rank adding its part before forwarding (NCCL's ring reduce)."""
    return chain([*ranks[1:][::-1], ranks[0]], nbytes, chunks)


def root_fan_out(ranks: list[int], nbytes: float) -> Dag:
    """Direct broadcast: the root (``ranks[0]``) sends the whole buffer to every peer."""
    transfers = [(ranks[0], r, nbytes) for r in ranks[1:]]
    return transfers, [[] for _ in transfers]


@dataclass(frozen=True)
class Algorithm:
    """One (op, algorithm) entry of the catalogue (module docstring)."""

    op: str
    name: str
    shape: Callable[[int], tuple[float, int]]
    dag: DagBuilder | None = None


def _ring_steps(steps: Callable[[int], int]) -> DagBuilder:
    return lambda ranks, s, _m, _c, gpn: rings(rail_rings(ranks, gpn), s, steps(len(ranks)))


#: Every flat algorithm, grouped by op in the order the cost model tries them (the first of an
#: op is NCCL's usual choice, :data:`DEFAULT_ALGORITHM`).
CATALOGUE: tuple[Algorithm, ...] = (
    Algorithm("all_reduce", "ring", lambda n: (2 * part(n), 2 * (n - 1)),
              _ring_steps(lambda n: 2 * (n - 1))),
    Algorithm("all_reduce", "tree", lambda n: (2.0, 2 * log2_steps(n))),
    Algorithm("all_reduce", "direct", lambda n: (2 * part(n), 2),
              lambda ranks, s, _m, _c, _g: direct_all_reduce(ranks, s)),
    Algorithm("all_reduce", "nvls", lambda n: (1.0, 2)),
    Algorithm("all_gather", "ring", lambda n: (part(n), n - 1), _ring_steps(lambda n: n - 1)),
    Algorithm("all_gather", "direct", lambda n: (part(n), 1),
              lambda ranks, s, _m, _c, _g: direct_pairs(ranks, s, None)),
    Algorithm("all_gather", "nvls", lambda n: (part(n), 1)),
    Algorithm("reduce_scatter", "ring", lambda n: (part(n), n - 1),
              _ring_steps(lambda n: n - 1)),
    Algorithm("reduce_scatter", "direct", lambda n: (part(n), 1),
              lambda ranks, s, _m, _c, _g: direct_pairs(ranks, s, None)),
    Algorithm("reduce_scatter", "nvls", lambda n: (part(n), 1)),
    Algorithm("broadcast", "ring", lambda n: (1.0, n - 1),
              lambda ranks, s, _m, c, gpn: chains(rail_rings(ranks, gpn), ranks[0], s, c)),
    Algorithm("broadcast", "tree", lambda n: (2.0, log2_steps(n))),
    Algorithm("broadcast", "direct", lambda n: (float(n - 1), 1),
              lambda ranks, s, _m, _c, _g: root_fan_out(ranks, s)),
    Algorithm("reduce", "ring", lambda n: (1.0, n - 1),
              lambda ranks, s, _m, c, _g: reduce_chain(ranks, s, c)),
    Algorithm("send_recv", "direct", lambda n: (1.0, 1),
              lambda ranks, s, _m, _c, _g: send_recv(ranks, s)),
    Algorithm("all_to_all", "direct", lambda n: (part(n), 1),
              lambda ranks, s, m, _c, _g: direct_pairs(ranks, s, m)),
)

#: Every collective op, in catalogue order.
OPS: tuple[str, ...] = tuple(dict.fromkeys(a.op for a in CATALOGUE))
#: (op, algorithm) -> its entry.
BY_KEY: dict[tuple[str, str], Algorithm] = {(a.op, a.name): a for a in CATALOGUE}
#: (op, algorithm) -> n -> (volume per rank per byte of size, latency steps).
SHAPES: dict[tuple[str, str], Callable[[int], tuple[float, int]]] = {
    key: a.shape for key, a in BY_KEY.items()
}
#: Flat (single-level) algorithms each op supports; ``hierarchical`` is added across nodes.
FLAT_ALGORITHMS: dict[str, tuple[str, ...]] = {
    op: tuple(a.name for a in CATALOGUE if a.op == op) for op in OPS
}
#: Algorithm a measurement is attributed to when its log does not say (NCCL's usual choice).
DEFAULT_ALGORITHM = {op: algs[0] for op, algs in FLAT_ALGORITHMS.items()}
#: Algorithms each op can run as transfers (those with a DAG).
DAG_ALGORITHMS: dict[str, tuple[str, ...]] = {
    op: tuple(a.name for a in CATALOGUE if a.op == op and a.dag is not None) for op in OPS
}


#: Collectives composed over the fabric's levels (:mod:`libra_des.hardware.collectives.hierarchy`):
#: node
#: and network (NCCL's ``hierarchical``) or every switch level (``multilevel``).
COMPOSED = ("hierarchical", "multilevel")
COMPOSED_OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")


def composed_dag(ranks: list[int], nbytes: float, steps: Sequence[Step], radices: list[int]) -> Dag:
    """A collective decomposed over levels as the flat rings (chains for broadcast) of its
    steps, run one after another: a rank starts a step once its own transfers of the previous
    step are done. ``radices[l]`` members of level ``l`` per unit of level ``l + 1``, ranks
    packed level 0 first (``ranks[i]``'s coordinate at level l is ``i // prod(radices[:l]) %
    radices[l]``). Level 0's all_reduce step (kept whole for pricing) runs as its two halves:
    a reduce_scatter first and an all_gather last."""
    if math.prod(radices) != len(ranks):
        raise InputError("gpus", len(ranks), f"whole units at every level ({radices} members)")
    order = list(steps)
    if order[0].op == "all_reduce" and len(order) > 1:
        order = [replace_op(order[0], "reduce_scatter"), *order[1:],
                 replace_op(order[0], "all_gather")]
    transfers: list[tuple[int, int, float]] = []
    deps: list[list[int]] = []
    last: dict[int, list[int]] = {r: [] for r in ranks}  # previous step's transfers per rank
    for step in order:
        mine: dict[int, list[int]] = {r: [] for r in ranks}
        for members in level_groups(ranks, radices, step.level, step.op == "broadcast"):
            t, d = step_dag(step, members, nbytes / step.divisor)
            first = len(transfers)
            for i, ((src, dst, size), before) in enumerate(zip(t, d, strict=True)):
                transfers.append((src, dst, size))
                deps.append([j + first for j in before] if before else list(last[src]))
                mine[src].append(first + i)
                mine[dst].append(first + i)
        last = {r: mine[r] or last[r] for r in ranks}
    return transfers, deps


def replace_op(step: Step, op: str) -> Step:
    return Step(step.level, op, step.ranks, step.divisor, step.span)


def level_groups(
    ranks: list[int], radices: list[int], level: int, rooted: bool = False
) -> list[list[int]]:
    """The groups of ``ranks`` that differ only in their level-``level`` coordinate, each in
    coordinate order; ``rooted``: only those whose lower coordinates are 0 (a broadcast going
    down reaches these first)."""
    below = math.prod(radices[:level])
    k = radices[level]
    groups: dict[tuple[int, int], list[int]] = {}
    for i, r in enumerate(ranks):
        if not rooted or i % below == 0:
            groups.setdefault((i % below, i // (below * k)), []).append(r)
    return list(groups.values())


def step_dag(step: Step, members: list[int], share: float) -> Dag:
    """One step among ``members`` on ``share`` bytes: a ring, or a chain for broadcast."""
    k = len(members)
    if step.op == "broadcast":
        return chain(members, share, k)
    return ring(members, share / k, 2 * (k - 1) if step.op == "all_reduce" else k - 1)


def transfer_dag(
    op: str,
    algorithm: str,
    ranks: Sequence[int],
    nbytes: float,
    send_bytes: np.ndarray | None = None,
    chunks: int | None = None,
    gpus_per_node: int = 0,
) -> Dag:
    """The transfers of ``op`` run by ``algorithm`` over ``ranks`` (``ranks[0]`` is the root;
    ``chunks`` pieces for a pipelined chain, one per rank by default; ``gpus_per_node`` places
    GPU ``r`` on node ``r // gpus_per_node`` for rail rings, 0: one node)."""
    if op not in OPS:
        raise InputError("op", op, " | ".join(OPS))
    entry = BY_KEY.get((op, algorithm))
    if entry is None or entry.dag is None:
        raise InputError("algorithm", algorithm, f"{' | '.join(DAG_ALGORITHMS[op])} (for {op})")
    members = list(ranks)
    if send_bytes is not None and op != "all_to_all":
        raise InputError("send_bytes", "a matrix", f"only for all_to_all (got {op})")
    return entry.dag(members, float(nbytes), send_bytes, chunks or len(members), gpus_per_node)
