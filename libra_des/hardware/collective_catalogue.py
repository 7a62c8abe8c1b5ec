"""One catalogue of collective algorithms: each gives its alpha-beta shape and its transfer DAG.

An :class:`Algorithm` entry answers two questions about one (op, algorithm) pair:

- ``shape(n) -> (volume per rank per byte of size, latency steps)``: what the analytic cost
  model (:mod:`libra_des.hardware.communication`) times with a fitted curve;
- ``dag(ranks, nbytes, send_bytes, chunks)``: the point-to-point transfers the algorithm is
  made of and, for each, the transfers it waits for, which the flow model
  (:mod:`libra_des.sim.network.flow_model`) runs on the topology. ``None`` where the
  algorithm is not a set of GPU-to-GPU transfers in our topology model (NVLS reduces inside
  the switch) or has no DAG yet (tree).

The two agree by construction, and ``tests/test_collective_catalogue.py`` checks it: the
busiest rank of an algorithm's DAG sends exactly ``volume * size`` bytes and the DAG's longest
dependency chain is ``steps`` transfers long (one chunk), for every op, algorithm, group size
and size. Sizes follow nccl-tests' ``size`` (see :mod:`libra_des.hardware.collectives`).

Pure data and functions (no SimPy). Ranks are GPU ids (any distinct integers); a DAG is
``(transfers, deps)`` with ``transfers[i] = (src, dst, bytes)`` and ``deps[i]`` the indices of
the transfers ``i`` waits for.

DAGs (assumptions stated once): ring all_reduce is 2(n-1) steps of ``S/n`` to the next rank,
ring all_gather and reduce_scatter n-1 such steps; in a ring, rank r starts step k+1 once its
own step-k send is done and it has received step k from rank r-1 (the data it forwards). A
group spanning nodes with the same number of members ``g`` on each runs ``g`` such rings in
parallel on ``1/g`` of the data each (:func:`rail_rings`: one channel per rail, as NCCL opens
one ring per NIC), which is the rate the alpha-beta ring assumes
(:func:`~libra_des.hardware.collectives.flat_rate`).
Ring broadcast is a pipelined chain (``chunks`` pieces forwarded rank to rank). Direct
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


def rings(
    orders: list[list[int]], nbytes: float, steps: int
) -> tuple[list[tuple[int, int, float]], list[list[int]]]:
    """Parallel rings, one per order, sharing ``nbytes`` equally (``nbytes/(n*rings)`` per
    transfer)."""
    transfers: list[tuple[int, int, float]] = []
    deps: list[list[int]] = []
    chunk = nbytes / (len(orders[0]) * len(orders))
    for order in orders:
        t, d = ring(order, chunk, steps)
        first = len(transfers)
        transfers += t
        deps += [[j + first for j in before] for before in d]
    return transfers, deps


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
              lambda ranks, s, _m, c, _g: chain(ranks, s, c)),
    Algorithm("broadcast", "tree", lambda n: (2.0, log2_steps(n))),
    Algorithm("broadcast", "direct", lambda n: (float(n - 1), 1),
              lambda ranks, s, _m, _c, _g: root_fan_out(ranks, s)),
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
