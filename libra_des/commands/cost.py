"""``libra-des cost``: one cost-model query (a collective, an attention call, or a GEMM).

Collectives: ``--op all_reduce --bytes 8388608 --group 4 [--topology T --gpus-per-node 8]``;
``--bytes`` follows nccl-tests' size column. Attention: ``--op attention --doc-lengths
4096,4096 --heads 64 --kv-heads 4 --head-dim 128 [--backward] [--cp 2]``. GEMM: ``--op gemm
--m 4096 --n 4096 --k 4096 --dtype bf16``.

Without ``--topology`` the profile's own machine is used (its ``interconnect.topology``, e.g.
``h200-8x-nvswitch`` for the default H200 profile), grown to as many nodes as the group needs.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

import numpy as np

from libra_des.api import fabric_for
from libra_des.commands.common import dumps, positive_ints
from libra_des.config.validation import MAX_GPUS, MAX_TOKENS
from libra_des.errors import InputError
from libra_des.hardware.collectives import ALGORITHMS
from libra_des.hardware.costs import CostModel
from libra_des.hardware.kernels import cp_shard, shard_pairs
from libra_des.hardware.profile import COLLECTIVE_OPS, DTYPE_BYTES, load_profile
from libra_des.results.plausibility import check_numbers

OPS = (*COLLECTIVE_OPS, "attention", "gemm")

#: The cost model's argument names -> this command's flags (errors name what the user typed).
FLAG_NAMES = {
    "op": "--op", "algorithm": "--algorithm", "group": "--group", "nbytes": "--bytes",
    "gpus_per_node": "--gpus-per-node", "doc_lengths": "--doc-lengths", "heads_q": "--heads",
    "heads_kv": "--kv-heads", "head_dim": "--head-dim", "m": "--m", "n": "--n", "k": "--k",
}


def register(subs: argparse._SubParsersAction) -> None:
    p = subs.add_parser("cost", help="time one collective, attention call or GEMM")
    p.add_argument("--profile", default=None, help="profile name or JSON (default h200-sxm)")
    p.add_argument("--op", required=True, help=" | ".join(OPS))
    p.add_argument("--bytes", type=float, default=None, help="nccl-tests size in bytes")
    p.add_argument("--group", type=int, default=None, help="number of GPUs")
    p.add_argument("--gpus-per-node", type=int, default=None, help="GPUs of the group per node")
    p.add_argument("--topology", default=None, help="topology name or YAML (default: profile's)")
    p.add_argument("--algorithm", default=None, help=" | ".join(ALGORITHMS) + " (default: fastest)")
    p.add_argument(
        "--no-fit", action="store_true", help="datasheet alpha-beta, no fitted efficiency"
    )
    p.add_argument("--doc-lengths", default=None, help="attention: comma-separated lengths")
    p.add_argument("--heads", type=int, default=None, help="attention: query heads per call")
    p.add_argument("--kv-heads", type=int, default=None, help="attention: KV heads per call")
    p.add_argument("--head-dim", type=int, default=128, help="attention: head dimension")
    p.add_argument("--cp", type=int, default=1, help="attention: context-parallel degree")
    p.add_argument("--backward", action="store_true", help="attention: the backward pass")
    p.add_argument("--m", type=int, default=None, help="gemm: rows")
    p.add_argument("--n", type=int, default=None, help="gemm: columns")
    p.add_argument("--k", type=int, default=None, help="gemm: inner dimension")
    p.add_argument("--dtype", default="bf16", help=" | ".join(DTYPE_BYTES))
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=handle, flag_names=FLAG_NAMES)


def require(args: argparse.Namespace, *names: str) -> None:
    for name in names:
        if getattr(args, name.replace("-", "_")) is None:
            raise InputError(f"--{name}", None, f"a value (needed for --op {args.op})")


#: Upper bounds of the numeric flags: (maximum, why). Our choices, far beyond real calls.
FLAG_LIMITS = {
    "group": (MAX_GPUS, "GPUs of the largest supported cluster"),
    "gpus_per_node": (1024, "GPUs per node"),
    "heads": (4096, "attention heads"),
    "kv_heads": (4096, "attention heads"),
    "head_dim": (4096, "head dimension"),
    "cp": (4096, "context-parallel workers"),
    "m": (1 << 24, "GEMM rows"),
    "n": (1 << 24, "GEMM columns"),
    "k": (1 << 24, "GEMM inner dimension"),
}
MAX_BYTES = float(1 << 40)  # 1 TiB: far above any GPU's memory


def check_flags(args: argparse.Namespace) -> None:
    """Every numeric flag within its bounds, before any cost model is built."""
    for name, (hi, why) in FLAG_LIMITS.items():
        value = getattr(args, name)
        if value is not None and not 1 <= value <= hi:
            raise InputError(f"--{name.replace('_', '-')}", value, f"1..{hi:,} ({why})")
    if args.bytes is not None and not (math.isfinite(args.bytes) and 1 <= args.bytes <= MAX_BYTES):
        raise InputError("--bytes", args.bytes, "a finite size in bytes, >= 1 and <= 2^40")
    if args.gpus_per_node is not None and args.group is not None and (
        args.gpus_per_node > args.group
    ):
        raise InputError("--gpus-per-node", args.gpus_per_node, f"<= --group={args.group}")
    if args.heads is not None and args.kv_heads is not None and args.heads % args.kv_heads:
        raise InputError("--kv-heads", args.kv_heads, f"a divisor of --heads={args.heads}")


def handle(args: argparse.Namespace) -> int:
    if args.op not in OPS:
        raise InputError("--op", args.op, " | ".join(OPS))
    check_flags(args)
    profile = load_profile(args.profile)
    group = args.group or 1
    fabric = fabric_for(profile, args.topology, group, args.gpus_per_node)
    model = CostModel(profile, fabric, efficiency=not args.no_fit)
    if args.op == "attention":
        result, text = attention(model, args)
    elif args.op == "gemm":
        result, text = gemm(model, args)
    else:
        result, text = collective(model, args)
    check_numbers(result)  # a non-finite or negative answer is a bug, never printed
    print(dumps(result) if args.json else text)
    return 0


#: Sizes of the default sweep when ``--bytes`` is not given (nccl-tests style, 1 KiB-1 GiB).
SWEEP_BYTES = tuple(float(2**k) for k in range(10, 31, 2))


def collective(model: CostModel, args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    require(args, "group")
    if args.bytes is None:
        return sweep(model, args)
    out, text = one_collective(model, args, args.bytes)
    return out, text


def one_collective(
    model: CostModel, args: argparse.Namespace, nbytes: float
) -> tuple[dict[str, Any], str]:
    res = model.collective(args.op, nbytes, args.group, args.gpus_per_node, args.algorithm)
    out = {"seconds": res.seconds, "algorithm": res.algorithm, "busbw_gbs": res.busbw_gbs}
    out.update(model.explain(args.op, nbytes, args.group, args.gpus_per_node, args.algorithm))
    gpn = args.gpus_per_node or min(args.group, model.fabric.gpus_per_node)
    text = (
        f"{args.op} of {nbytes:.0f} B on {args.group} GPUs ({gpn} per node): "
        f"{res.seconds * 1e6:.2f} us via {res.algorithm}, bus bandwidth {res.busbw_gbs:.1f} GB/s "
        f"({res.tier} curves)"
    )
    return out, text


def sweep(model: CostModel, args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """Without ``--bytes``: every size of :data:`SWEEP_BYTES`; ``tier`` is the worst row's."""
    rows, lines = [], []
    for size in SWEEP_BYTES:
        out, text = one_collective(model, args, size)
        rows.append({"bytes": size, **out})
        lines.append(text)
    order = ("measured", "borrowed", "datasheet")
    worst = max((str(r["tier"]) for r in rows), key=order.index)
    return {"tier": worst, "rows": rows}, "\n".join(lines)


def attention(model: CostModel, args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    require(args, "doc-lengths", "heads")
    lengths = positive_ints("--doc-lengths", args.doc_lengths)
    if len(lengths) > 1_000_000 or max(lengths) > MAX_TOKENS:
        raise InputError("--doc-lengths", f"{len(lengths)} lengths up to {max(lengths)}",
                         f"at most 10^6 documents of <= {MAX_TOKENS:,} tokens")
    kv = args.kv_heads if args.kv_heads is not None else args.heads
    secs = model.attention_docs(lengths, args.heads, kv, args.head_dim, args.backward, args.cp)
    q, k = cp_shard(np.asarray(lengths, dtype=np.float64), args.cp)
    pairs = float(shard_pairs(q, k).sum())
    flops = (
        4.0 * args.head_dim * args.heads * pairs * (model.attn.bwd_flops if args.backward else 1)
    )
    tflops = flops / secs / 1e12 if secs > 0 else 0.0
    pass_ = "backward" if args.backward else "forward"
    text = (
        f"attention {pass_} over {len(lengths)} documents, {args.heads} heads: "
        f"{secs * 1e3:.4f} ms ({tflops:.0f} TFLOP/s)"
    )
    return {"seconds": secs, "tflops": tflops}, text


def gemm(model: CostModel, args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    require(args, "m", "n", "k")
    if args.dtype not in DTYPE_BYTES:
        raise InputError("--dtype", args.dtype, " | ".join(DTYPE_BYTES))
    secs = float(model.gemm(args.m, args.n, args.k, args.dtype))
    tflops = 2.0 * args.m * args.n * args.k / secs / 1e12 if secs > 0 else 0.0
    shape = f"{args.m}x{args.k} @ {args.k}x{args.n} {args.dtype}"
    text = f"gemm {shape}: {secs * 1e6:.2f} us ({tflops:.0f} TFLOP/s)"
    return {"seconds": secs, "tflops": tflops}, text
