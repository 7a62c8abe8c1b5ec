"""The cost-op registry: what ``libra_des.cost`` and ``libra-des cost --op`` can price, by name.

A cost op is one :class:`CostOp`: its name, the query arguments it needs, and its ``price``
function, which checks its own arguments (one line of bad input each) and answers a
:class:`CostReport`: the seconds, the ``cost --json`` fields and the one line ``cost``
prints. The API (:func:`libra_des.api.cost`, :func:`libra_des.api.cost_report`) looks the
op up here and the command goes through the API, so a new op is one function and one
:func:`register` call (shipped ones: one more entry of :func:`shipped`; from another package:
an entry point of the group ``libra_des.cost_ops``). The shipped ops are every collective of
:data:`~libra_des.hardware.profiles.profile.COLLECTIVE_OPS` (nccl-tests' ``size`` in ``nbytes``),
``attention`` (a FlashAttention-style call over documents) and ``gemm``.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from libra_des.base.numbers import with_unit
from libra_des.config.validation import MAX_TOKENS
from libra_des.errors import InputError
from libra_des.hardware.compute.kernels import cp_shard, shard_pairs
from libra_des.hardware.costs import CostModel
from libra_des.hardware.profiles.profile import COLLECTIVE_OPS, DTYPE_BYTES
from libra_des.registry import Registry, shipped_then_entry_points

#: Entry-point group third-party cost ops register under.
GROUP = "libra_des.cost_ops"
#: Query bounds: 1 TiB (above any GPU's memory) and 2^24 GEMM rows/columns; our choices.
MAX_NBYTES = float(1 << 40)
MAX_GEMM_DIM = 1 << 24


def is_int(value: Any) -> bool:
    """An integer (numpy's too), not a bool: what count-like arguments accept."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


@dataclass(frozen=True)
class CostQuery:
    """Every argument an op may read (each op reads its own; see :class:`CostOp`)."""

    nbytes: float | None = None
    group: int = 1
    gpus_per_node: int | None = None
    algorithm: str | None = None
    doc_lengths: Sequence[int] | None = None
    heads: int | None = None
    kv_heads: int | None = None
    head_dim: int = 128
    cp: int = 1
    backward: bool = False
    gemm: Sequence[int] | None = None
    dtype: str = "bf16"


@dataclass(frozen=True)
class CostReport:
    """One op's price: ``seconds``, the ``cost --json`` fields (``seconds`` first) and the
    line ``cost`` prints."""

    seconds: float
    fields: dict[str, Any]
    text: str


@dataclass(frozen=True)
class CostOp:
    """One priceable op. ``needs``: the :class:`CostQuery` arguments it cannot do without (a
    command asks for them before pricing); ``sized``: its size is ``nbytes``, so a command may
    sweep sizes when none is given."""

    name: str
    price: Callable[[CostModel, CostQuery, str], CostReport] = field(compare=False)
    needs: tuple[str, ...] = ()
    sized: bool = False


def collective(model: CostModel, q: CostQuery, op: str) -> CostReport:
    """nccl-tests' ``size`` over ``group`` GPUs, the fastest algorithm unless one is named."""
    nbytes = q.nbytes
    if isinstance(nbytes, bool) or not isinstance(nbytes, int | float) or not (
            0 <= nbytes <= MAX_NBYTES):
        raise InputError("nbytes", nbytes, f"a size in bytes, 0..2^40 (for {op})")
    res = model.collective(op, nbytes, q.group, q.gpus_per_node, q.algorithm)
    out: dict[str, Any] = {"seconds": res.seconds, "algorithm": res.algorithm,
                           "busbw_gbs": res.busbw_gbs, "protocol": res.protocol,
                           "channels": res.channels}
    out.update(model.explain(op, nbytes, q.group, q.gpus_per_node, q.algorithm))
    gpn = q.gpus_per_node or min(q.group, model.fabric.gpus_per_node)
    proto = f"/{res.protocol} on {res.channels} channels" if res.channels else (
        f"/{res.protocol}" if res.protocol else "")
    text = (
        f"{op} of {with_unit(nbytes, 'B')} on {q.group} GPUs ({gpn} per node): "
        f"{with_unit(res.seconds, 's')} via {res.algorithm}{proto}, "
        f"bus bandwidth {with_unit(res.busbw_gbs * 1e9, 'B/s')} ({res.tier} curves)"
    )
    return CostReport(res.seconds, out, text)


def attention(model: CostModel, q: CostQuery, _op: str) -> CostReport:
    """One attention call over ``doc_lengths`` (causal per document), CP-sharded over ``cp``."""
    lengths, heads = q.doc_lengths, q.heads
    if lengths is None or heads is None:
        raise InputError("doc_lengths", lengths, "lengths and heads (for attention)")
    kv = heads if q.kv_heads is None else q.kv_heads
    if isinstance(lengths, str | bytes) or not all(is_int(n) for n in lengths):
        raise InputError("doc_lengths", lengths, "a list of integer token counts")
    if not is_int(heads) or not is_int(kv) or kv < 1 or heads % kv:
        raise InputError("kv_heads", kv, f"an integer divisor of heads={heads}")
    longest = max(lengths, default=0)
    if not is_int(q.head_dim) or longest > MAX_TOKENS:
        raise InputError("doc_lengths", f"head_dim={q.head_dim}, longest {longest}",
                         f"an integer head_dim; documents of <= {MAX_TOKENS:,} tokens")
    secs = model.attention_docs(list(lengths), heads, kv, q.head_dim, q.backward, q.cp)
    shard_q, shard_k = cp_shard(np.asarray(lengths, dtype=np.float64), q.cp)
    pairs = float(shard_pairs(shard_q, shard_k).sum())
    flops = 4.0 * q.head_dim * heads * pairs * (model.attn.bwd_flops if q.backward else 1)
    tflops = flops / secs / 1e12 if secs > 0 else 0.0
    direction = "backward" if q.backward else "forward"
    text = (f"attention {direction} over {len(lengths)} documents, {heads} heads: "
            f"{with_unit(secs, 's')} ({with_unit(tflops * 1e12, 'FLOP/s')})")
    tier = model.attention_tier()
    return CostReport(secs, {"seconds": secs, "tflops": tflops, "tier": tier},
                      f"{text} ({tier})")


def gemm(model: CostModel, q: CostQuery, _op: str) -> CostReport:
    """An (m, n, k) GEMM in ``dtype`` on the roofline (fitted efficiency where measured)."""
    shape = q.gemm
    if not isinstance(shape, tuple | list) or len(shape) != 3 or not all(
            is_int(x) and 1 <= x <= MAX_GEMM_DIM for x in shape):
        raise InputError("gemm", shape, f"(m, n, k) for a GEMM, integers 1..{MAX_GEMM_DIM:,}")
    if q.dtype not in DTYPE_BYTES:
        raise InputError("dtype", q.dtype, " | ".join(DTYPE_BYTES))
    m, n, k = shape
    secs = float(model.gemm(m, n, k, dtype=q.dtype))
    tflops = 2.0 * m * n * k / secs / 1e12 if secs > 0 else 0.0
    tier = model.gemm_tier(q.dtype)
    text = (f"gemm {m}x{k} @ {k}x{n} {q.dtype}: {with_unit(secs, 's')} "
            f"({with_unit(tflops * 1e12, 'FLOP/s')}, "
            f"{tier})")
    return CostReport(secs, {"seconds": secs, "tflops": tflops, "tier": tier}, text)


def borrowed(report: CostReport, warnings: list[str]) -> CostReport:
    """``report`` priced with a profile measured on another GPU (the device check's
    ``warnings``, :mod:`~libra_des.hardware.profiles.device_check`): its measured tier is
    borrowed."""
    if not warnings:
        return report
    fields = dict(report.fields)
    if fields.get("tier") == "measured":
        fields["tier"] = "borrowed"
    fields["warnings"] = list(warnings)
    text = re.sub(r"\bmeasured(?=\)| curves\))", "borrowed", report.text)
    return CostReport(report.seconds, fields, "\n".join([text, *warnings]))


def shipped() -> tuple[CostOp, ...]:
    """The shipped ops, in ``--op``'s order: the collectives, then attention and gemm."""
    collectives = tuple(CostOp(op, collective, ("group",), sized=True) for op in COLLECTIVE_OPS)
    return (*collectives, CostOp("attention", attention, ("doc_lengths", "heads")),
            CostOp("gemm", gemm, ("gemm",)))


#: The process's registry (a plug-in registry is the one piece of module state by design).
REGISTRY: Registry[CostOp] = Registry(
    "cost op", "op", shipped_then_entry_points(shipped, GROUP, CostOp)
)
register = REGISTRY.register
names = REGISTRY.names
get = REGISTRY.get
