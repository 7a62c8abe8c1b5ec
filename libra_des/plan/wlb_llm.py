"""WLB-LLM as its code runs it (docs/model.md A, "WLB-LLM as run").

Sources: the WLB-LLM paper (OSDI'25, arXiv 2503.17924) and the implementation DistCA ships
and runs as its WLB-LLM baseline (hao-ai-lab/distca: ``distca/planner/wlb_planner.py`` for the
packing, ``baseline/wlbllm_original/wlbllm/`` for the CP sharding, ``tests/test_wlb_e2e.py``
for how the two are driven).

Packing (``wlb_planner.balance_data_for_wlbllm``): every document of the global batch, longest
first (a stable sort), goes to the bin of least workload if it fits the bin's token cap, else
to the bin of fewest tokens if it fits there, else it waits; the waiting documents then go,
in order, to the bin of least workload with no cap. A bin is one microbatch of one DP replica
(the caller packs ``dp x microbatches`` bins). The workload of a bin is
``Σ (l/B)² + l/B`` with the fixed breakpoint ``B = 128Ki`` tokens, where a document's attention
work equals its linear work (the code's constant; it does not read the model). Lengths stay
whole; no document is deferred (the code raises on deferral), which this model keeps as a
knob, off by default, with the paper's outlier queue.

CP sharding (``per_doc_cp_attn.py``, ``per_seq_cp_attn.py``, ``utils.py``): per-sequence cuts
the packed sequence into ``2 cp`` equal chunks and rank r computes chunks r and 2cp-1-r (a
document cut by a chunk edge keeps its prefix as keys); per-document cuts every document into
``2 cp`` chunks (``l // 2cp`` each, the remainder one token at a time round-robin across the
documents) and rank r computes chunks r and 2cp-1-r of every document, which balances the
causal pairs exactly but runs chunks of ``l / 2cp`` queries, inefficient for short documents.
Both all-gather K and V over the CP group before attention (the backward reduce-scatters dK,
dV back), every rank computes all query heads of its own queries, and O stays where it is.
The paper chooses per microbatch between the two by their estimated attention latency; here
the estimate is the FlashAttention tile area each rank computes (``hardware.kernels``'
tile geometry, which is where the kernel model's small-chunk inefficiency comes from), the
slowest rank's, and a tie goes to per-document.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from libra_des.config import ModelSpec
from libra_des.errors import InputError
from libra_des.hardware.compute.tiles import BLOCK_M, BLOCK_N, tile_geometry
from libra_des.plan.attention import as_lengths, segments
from libra_des.plan.types import AttentionPlan, PairBytes

#: The code's attention/linear breakpoint in tokens (``wlb_planner.get_workload``:
#: ``ATTN_LINEAR_BREAKPOINT``, default 128 * 1024).
BREAKPOINT = 128 * 1024

#: The CP sharding rules: the paper's adaptive choice, or one forced.
Sharding = Literal["adaptive", "per_document", "per_sequence"]
SHARDINGS: tuple[str, ...] = ("adaptive", "per_document", "per_sequence")


def pack_bins(lengths: np.ndarray, cap: int, bins: int, breakpoint: int = BREAKPOINT
              ) -> np.ndarray:
    """Bin of every document under the code's two-pass greedy (see the module docstring).

    Ties go to the lowest bin index (``list.index(min(...))``). One Python step per document,
    as the code runs it; ``bins`` numpy reductions per step.
    """
    if cap <= 0:
        raise InputError("packed_length", cap, "> 0")
    if bins <= 0:
        raise InputError("bins", bins, "a positive number of microbatches")
    lens = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(-lens, kind="stable")
    slot = np.full(lens.size, -1, dtype=np.int64)
    tokens = np.zeros(bins, dtype=np.int64)
    work = np.zeros(bins)
    waiting: list[int] = []
    for i in order.tolist():
        doc = int(lens[i])
        k = int(np.argmin(work))
        if tokens[k] + doc > cap:
            k = int(np.argmin(tokens))
            if tokens[k] + doc > cap:
                waiting.append(i)
                continue
        slot[i] = k
        tokens[k] += doc
        work[k] += (doc / breakpoint) ** 2 + doc / breakpoint
    for i in waiting:
        doc = int(lens[i])
        k = int(np.argmin(work))
        slot[i] = k
        tokens[k] += doc
        work[k] += (doc / breakpoint) ** 2 + doc / breakpoint
    return slot


def doc_chunks(lengths: np.ndarray, cp: int) -> np.ndarray:
    """``[docs, 2cp]`` chunk lengths of per-document sharding.

    ``l // 2cp`` tokens each; the remainders go one token at a time to chunk indices in a
    round-robin that carries over from one document to the next (``utils.py``).
    """
    lens = np.asarray(lengths, dtype=np.int64)
    parts = 2 * cp
    rem = lens % parts
    start = (np.cumsum(rem) - rem) % parts
    shift = (np.arange(parts)[None, :] - start[:, None]) % parts
    return lens[:, None] // parts + (shift < rem[:, None])


def per_document(lengths: np.ndarray, cp: int) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                         np.ndarray]:
    """Per-chunk (rank, queries, keys, document length) of per-document sharding."""
    chunks = doc_chunks(lengths, cp)
    keys = np.cumsum(chunks, axis=1)
    parts = 2 * cp
    idx = np.arange(parts)
    rank = np.broadcast_to(np.minimum(idx, parts - 1 - idx), chunks.shape)
    doc = np.broadcast_to(np.asarray(lengths, dtype=np.int64)[:, None], chunks.shape)
    keep = chunks > 0
    return rank[keep], chunks[keep], keys[keep], doc[keep]


def per_sequence(lengths: np.ndarray, cp: int) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                         np.ndarray]:
    """Per-segment (rank, queries, keys, document length) of per-sequence sharding."""
    lens = as_lengths(lengths)
    parts = 2 * cp
    seg = segments(lens, max(1, -(-int(lens.sum()) // parts)))
    rank = np.minimum(seg.block, parts - 1 - seg.block)
    return rank, seg.e - seg.a, seg.e, lens[seg.sample]


def tile_load(rank: np.ndarray, q: np.ndarray, k: np.ndarray, cp: int) -> float:
    """The slowest rank's FlashAttention tile area: the adaptive rule's latency estimate."""
    cells = tile_geometry(q, k, BLOCK_M, BLOCK_N)[1]
    return float(np.bincount(rank, weights=cells, minlength=cp).max())


def choose_sharding(lengths: np.ndarray, cp: int, rule: Sharding = "adaptive") -> str:
    """``per_document`` or ``per_sequence`` for one microbatch under ``rule``."""
    if rule != "adaptive":
        return rule
    doc = tile_load(*per_document(lengths, cp)[:3], cp)
    seq = tile_load(*per_sequence(lengths, cp)[:3], cp)
    return "per_document" if doc <= seq else "per_sequence"


def wlb_attention_plan(lengths: np.ndarray, *, cp: int, model: ModelSpec,
                       rule: Sharding = "adaptive") -> AttentionPlan:
    """One microbatch's CP attention under WLB-LLM's sharding (see the module docstring)."""
    if cp <= 0:
        raise InputError("cp", cp, "a positive CP degree")
    if rule not in SHARDINGS:
        raise InputError("balancer.wlb_cp_sharding", rule, ", ".join(SHARDINGS))
    lens = as_lengths(lengths)
    chosen = choose_sharding(lens, cp, rule)
    rank, q, k, doc = (per_document if chosen == "per_document" else per_sequence)(lens, cp)
    qf, kf = q.astype(np.float64), k.astype(np.float64)
    pairs = qf * (kf - qf) + qf * (qf + 1) / 2

    def fold(x: np.ndarray) -> np.ndarray:
        return np.bincount(rank, weights=x, minlength=cp)

    total = fold(pairs)
    safe = np.where(total > 0, total, 1.0)
    local = np.bincount(rank, weights=qf, minlength=cp)  # tokens each rank holds
    kv_width = 2.0 * model.heads_kv * model.head_dim * model.dtype_bytes
    gather = (1.0 - np.eye(cp)) * (local * kv_width)[:, None]
    return AttentionPlan(
        policy="wlb_llm",
        worker_pairs=total * model.heads_q,
        worker_doc_len=fold(pairs * doc) / safe,
        worker_heads=np.full(cp, model.heads_q, dtype=np.int64),
        dispatch=PairBytes.of(gather),
        returns=PairBytes.of(np.zeros((cp, cp))),
        worker_query_len=fold(pairs * qf) / safe,
        worker_key_len=fold(pairs * kf) / safe,
        sharding=chosen,
    )
