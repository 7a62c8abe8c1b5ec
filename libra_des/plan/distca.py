"""DistCA as its code runs it: core-attention tasks balanced over attention servers
(docs/model.md A, "DistCA as run").

Sources: the DistCA paper (arXiv 2510.18121: core attention disaggregation, attention servers
that are the training GPUs themselves, ping-pong overlap) and its planner
(hao-ai-lab/distca ``distca/planner/planner.py``: ``batch_to_items_general``, ``Item``,
``Planner.plan_items``).

Tasks start where the linear layers hold their tokens: each replica's packed sequence is laid
over its ``cp`` GPUs in order, ``ceil(L/cp)`` tokens each. A document that fits one GPU is one
whole task; one that spans GPUs gives each GPU a chunk, cut head-and-tail like CP (half its
tokens from the document's front, half from its back, so every chunk's causal work is alike).

The scheduler (``plan_items``): work = exact causal pairs. Every GPU's surplus or deficit
against the mean is computed; GPUs whose deficit exceeds ``tolerance x mean`` (0.1, the
Planner's default) are served most needy first. For one, while its remaining need exceeds the
tolerance, every task on a GPU with surplus is a candidate; its priority is bytes per unit of
work moved (Q of the queries that would move plus K, V of the whole document, over
``min(donor surplus, need, task work)``) and the lowest moves: whole if the amount covers it,
else ``floor(amount / (l + 1))`` query pairs (one from the head, one from the tail, l + 1
pairs together) split off as a new task. A GPU's surplus or need moves by what moved.

What a moved task costs: its Q (all query heads) and the K, V of its keys go from the GPU that
holds the tokens to the server (K, V once per document and server: the longest prefix its
tasks there need); O and the softmax statistics (fp32, one per query head) come
back; every server computes all query heads of its tasks, each task a varlen chunk whose shape
(queries, keys) sets the kernel's efficiency. Ping-pong (two nano-batches) overlaps the
exchange with compute: the plan's two Pipeliner chunks.

Left out (not expressible as one attention plan per slot, or not read in time): the
in-place server memory scheme, the CUDA-graph and NVSHMEM all-to-all implementation details,
the planner's buffer-size checks that raise the tolerance, pipeline-parallel ticks.
"""

from __future__ import annotations

import numpy as np

from libra_des.config import ModelSpec
from libra_des.errors import InputError
from libra_des.plan.attention import as_lengths, expand_runs, segments
from libra_des.plan.types import AttentionPlan, PairBytes

#: ``Planner(tolerance_factor=0.1)``: the default of DistCA's planner.
TOLERANCE = 0.1
#: Ping-pong: DistCA splits each microbatch into two nano-batches (paper, ping-pong scheme).
PING_PONG = 2


class Tasks:
    """CA-tasks as arrays: server, home GPU, document (id, length), head and tail (queries,
    keys). A whole document is a head of ``l`` queries and ``l`` keys with an empty tail.
    """

    def __init__(self, server: np.ndarray, ident: np.ndarray, doc: np.ndarray, hq: np.ndarray,
                 hk: np.ndarray, tq: np.ndarray, tk: np.ndarray) -> None:
        self.server, self.home = server.copy(), server.copy()
        self.ident, self.doc, self.hq, self.hk, self.tq, self.tk = ident, doc, hq, hk, tq, tk

    def whole(self, i: int) -> bool:
        """Task ``i`` is still a whole document (not yet cut head and tail)."""
        return bool(self.tq[i] == 0 and self.hq[i] == self.doc[i])

    def work(self) -> np.ndarray:
        """Exact causal pairs of every task (``q kv - q (q-1)/2`` per part)."""
        result: np.ndarray = part_pairs(self.hq, self.hk) + part_pairs(self.tq, self.tk)
        return result

    def append(self, i: int, q: int, server: int) -> None:
        """Split ``q`` head and ``q`` tail queries of task ``i`` off to ``server``."""
        if self.whole(i):
            length = int(self.hq[i])
            self.hq[i] = self.hk[i] = (length + 1) // 2 - q
            self.tq[i], self.tk[i] = length // 2 - q, length
        else:
            self.hq[i] -= q
            self.hk[i] -= q
            self.tq[i] -= q
        new = {"server": server, "home": self.home[i], "ident": self.ident[i],
               "doc": self.doc[i], "hq": q,
               "hk": self.hk[i] + q, "tq": q, "tk": self.tk[i] - self.tq[i]}
        for name, value in new.items():
            setattr(self, name, np.append(getattr(self, name), value))


def part_pairs(q: np.ndarray | int, k: np.ndarray | int) -> np.ndarray:
    """Causal pairs of ``q`` queries that end a ``k``-key prefix (bottom-right aligned)."""
    qf, kf = np.asarray(q, np.float64), np.asarray(k, np.float64)
    return qf * kf - qf * (qf - 1) / 2


def initial_tasks(seqs: list[np.ndarray], cp: int, budget: int) -> Tasks:
    """The tasks of the MLP layout: each replica's documents over its ``cp`` GPUs in order."""
    if cp <= 0 or budget <= 0:
        raise InputError("cp", cp, "a positive CP degree and per-GPU token budget")
    parts = []
    first_id = 0
    for r, seq in enumerate(seqs):
        lens = as_lengths(seq)
        seg = segments(lens, budget)
        if int(seg.block.max(initial=0)) >= cp:
            raise InputError("packed_length", budget * cp, f">= {int(lens.sum())} tokens")
        size = seg.e - seg.a
        whole = size == lens[seg.sample]
        head = size // 2
        tail = size - head
        # Chunks of one document: heads accumulate from its front, tails from its back.
        first = np.r_[True, seg.sample[1:] != seg.sample[:-1]]
        doc = lens[seg.sample]
        hq = np.where(whole, doc, head)
        hk = np.where(whole, doc, earlier(head, first) + head)
        tq = np.where(whole, 0, tail)
        tk = np.where(whole, 0, doc - earlier(tail, first))
        parts.append((r * cp + seg.block, first_id + seg.sample, doc, hq, hk, tq, tk))
        first_id += lens.size
    cols = [np.concatenate([p[c] for p in parts]).astype(np.int64) for c in range(7)]
    return Tasks(*cols)


def earlier(x: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Sum of ``x`` over the earlier entries of the same run (runs start where ``first``)."""
    run = np.cumsum(x) - x
    result: np.ndarray = run - np.maximum.accumulate(np.where(first, run, 0))
    return result


def schedule(tasks: Tasks, servers: int, model: ModelSpec, tolerance: float = TOLERANCE
             ) -> Tasks:
    """Move work from GPUs above the mean to those below it (``plan_items``, module doc)."""
    load = np.bincount(tasks.server, weights=tasks.work(), minlength=servers)
    mean = float(load.mean())
    surplus = load - mean
    threshold = mean * tolerance
    q_width, kv_width = model.heads_q * model.head_dim, 2 * model.heads_kv * model.head_dim
    for r in np.argsort(surplus, kind="stable").tolist():
        if surplus[r] >= 0:
            break
        need = -float(surplus[r])
        while need > threshold:
            work = tasks.work()
            donor = surplus[tasks.server] > 0
            candidates = np.flatnonzero(donor & (work > 0))
            if candidates.size == 0:
                break
            amount = np.minimum(np.minimum(surplus[tasks.server[candidates]], need),
                                work[candidates])
            span = tasks.doc[candidates] + 1.0
            cost = (amount / span * q_width + span * kv_width) / amount
            i = int(candidates[np.argmin(cost)])
            give, src = float(amount[np.argmin(cost)]), int(tasks.server[i])
            if give >= work[i]:
                tasks.server[i] = r
                moved = float(work[i])
            else:
                q = int(give // (int(tasks.doc[i]) + 1))
                ends = (int(tasks.doc[i]) // 2,) if tasks.whole(i) else (int(tasks.hq[i]),
                                                                          int(tasks.tq[i]))
                q = min(q, *ends)
                if q <= 0:
                    break
                tasks.append(i, q, r)
                moved = float(part_pairs(q, tasks.hk[-1]) + part_pairs(q, tasks.tk[-1]))
            surplus[src] -= moved
            surplus[r] += moved
            need -= moved
    return tasks


def kv_routes(dispatch: np.ndarray, tasks: Tasks, moved: np.ndarray, keys: np.ndarray,
              held: tuple[np.ndarray, np.ndarray, np.ndarray], kv_bytes: float) -> None:
    """Add the K, V each server fetches: once per document, the longest prefix its tasks
    there need, sent by the GPUs holding the document's tokens in proportion to their share
    (a GPU sends nothing to itself). ``held``: the initial tasks' (document, GPU, share of
    the document's tokens), in document order."""
    route, where = np.unique(np.stack([tasks.server[moved], tasks.ident[moved]]), axis=1,
                             return_inverse=True)
    prefix = np.zeros(route.shape[1])
    np.maximum.at(prefix, where.ravel(), keys[moved])
    ident, gpu, share = held
    lo = np.searchsorted(ident, route[1], side="left")
    hi = np.searchsorted(ident, route[1], side="right")
    which, pos = expand_runs(hi - lo)
    row = lo[which] + pos
    np.add.at(dispatch, (gpu[row], route[0][which]), prefix[which] * share[row] * kv_bytes)
    np.fill_diagonal(dispatch, 0.0)


def distca_attention_plan(seqs: list[np.ndarray], *, cp: int, model: ModelSpec,
                          packed_length: int, tolerance: float = TOLERANCE) -> AttentionPlan:
    """One slot's core attention over the pool's ``len(seqs) x cp`` attention servers."""
    servers = len(seqs) * cp
    tasks = initial_tasks(seqs, cp, -(-packed_length // cp))
    held = (tasks.ident.copy(), tasks.home.copy(), (tasks.hq + tasks.tq) / tasks.doc)
    tasks = schedule(tasks, servers, model, tolerance)
    pairs = tasks.work()
    keep = pairs > 0
    parts = np.stack([part_pairs(tasks.hq, tasks.hk), part_pairs(tasks.tq, tasks.tk)])
    q_len = (parts[0] * tasks.hq + parts[1] * tasks.tq)
    k_len = (parts[0] * tasks.hk + parts[1] * tasks.tk)

    def fold(x: np.ndarray) -> np.ndarray:
        return np.bincount(tasks.server[keep], weights=x[keep], minlength=servers)

    total = fold(pairs)
    safe = np.where(total > 0, total, 1.0)
    moved = keep & (tasks.server != tasks.home)
    queries = (tasks.hq + tasks.tq).astype(np.float64)
    keys = np.maximum(tasks.hk, tasks.tk).astype(np.float64)
    width = model.head_dim * model.dtype_bytes
    back = queries * model.heads_q * (width + 4)  # O, and the fp32 softmax statistics
    dispatch = np.zeros((servers, servers))
    returns = np.zeros((servers, servers))
    home, server = tasks.home[moved], tasks.server[moved]
    np.add.at(dispatch, (home, server), queries[moved] * model.heads_q * width)
    kv_routes(dispatch, tasks, moved, keys, held, 2 * model.heads_kv * width)
    np.add.at(returns, (tasks.server[moved], tasks.home[moved]), back[moved])
    return AttentionPlan(
        policy="distca",
        worker_pairs=total * model.heads_q,
        worker_doc_len=fold(pairs * tasks.doc) / safe,
        worker_heads=np.full(servers, model.heads_q, dtype=np.int64),
        dispatch=PairBytes.of(dispatch),
        returns=PairBytes.of(returns),
        chunks=PING_PONG,
        tiles=int(keep.sum()),
        worker_query_len=fold(q_len) / safe,
        worker_key_len=fold(k_len) / safe,
    )
