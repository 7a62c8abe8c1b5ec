"""``libra-des cost``: one cost-model query (a collective, an attention call, or a GEMM).

Collectives: ``--op all_reduce --bytes 8388608 --group 4 [--topology T --gpus-per-node 8]``;
``--bytes`` follows nccl-tests' size column. Attention: ``--op attention --doc-lengths
4096,4096 --heads 64 --kv-heads 4 --head-dim 128 [--backward] [--cp 2]``. GEMM: ``--op gemm
--m 4096 --n 4096 --k 4096 --dtype bf16``.

Without ``--topology`` the profile's own machine is used (its ``interconnect.topology``, e.g.
``h200-8x-nvswitch`` for the default H200 profile), grown to as many nodes as the group needs.
The ops are the API's registered cost ops (:func:`libra_des.api.cost_report` prices each);
this command reads flags, asks for what an op needs, and prints.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from libra_des.api import costs as api
from libra_des.api.costs import check_numbers, cost_limits
from libra_des.commands.common import dumps, positive_ints
from libra_des.errors import InputError

#: The cost model's argument names -> this command's flags (errors name what the user typed).
FLAG_NAMES = {
    "op": "--op", "algorithm": "--algorithm", "group": "--group", "nbytes": "--bytes",
    "gpus_per_node": "--gpus-per-node", "doc_lengths": "--doc-lengths", "heads_q": "--heads",
    "heads_kv": "--kv-heads", "head_dim": "--head-dim", "m": "--m", "n": "--n", "k": "--k",
    "heads": "--heads", "kv_heads": "--kv-heads", "dtype": "--dtype",
}


def register(subs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    choices = api.cost_choices()
    p = subs.add_parser("cost", help="time one collective, attention call or GEMM")
    p.add_argument("--profile", default=None, help="profile name or JSON (default h200-sxm)")
    p.add_argument("--profile-scope", default="own", choices=("own", "borrowed"),
                   help="borrowed: price with a profile measured on another GPU (as run's "
                   "profile_scope; the result warns)")
    p.add_argument("--op", required=True, help=" | ".join(choices["op"]))
    p.add_argument("--bytes", type=float, default=None, help="nccl-tests size in bytes")
    p.add_argument("--group", type=int, default=None, help="number of GPUs")
    p.add_argument("--gpus-per-node", type=int, default=None, help="GPUs of the group per node")
    p.add_argument("--topology", default=None, help="topology name or YAML (default: profile's)")
    p.add_argument("--algorithm", default=None,
                   help=" | ".join(choices["algorithm"]) + " (default: fastest)")
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
    p.add_argument("--dtype", default="bf16", help=" | ".join(choices["dtype"]))
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=handle, flag_names=FLAG_NAMES)


#: The scenario limits: the largest cluster and the longest document.
LIMITS = cost_limits()
#: Upper bounds of the numeric flags: (maximum, why). Our choices, far beyond real calls.
FLAG_LIMITS = {
    "group": (LIMITS.gpus, "GPUs of the largest supported cluster"),
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
#: Where an op's needed argument comes from: the flags that give it.
NEEDED_FLAGS = {"gemm": ("m", "n", "k"), "nbytes": ("bytes",)}


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


def require(args: argparse.Namespace, needs: tuple[str, ...]) -> None:
    """Each argument the op needs, given (named by the flags that give it)."""
    for need in needs:
        for flag in NEEDED_FLAGS.get(need, (need,)):
            if getattr(args, flag) is None:
                raise InputError(f"--{flag.replace('_', '-')}", None,
                                 f"a value (needed for --op {args.op})")


def doc_lengths(args: argparse.Namespace) -> list[int] | None:
    if args.doc_lengths is None:
        return None
    lengths = positive_ints("--doc-lengths", args.doc_lengths)
    if len(lengths) > 1_000_000 or max(lengths) > LIMITS.tokens:
        raise InputError("--doc-lengths", f"{len(lengths)} lengths up to {max(lengths)}",
                         f"at most 10^6 documents of <= {LIMITS.tokens:,} tokens")
    return lengths


def query(args: argparse.Namespace, nbytes: float | None) -> dict[str, Any]:
    """The API's arguments from the flags."""
    gemm = (args.m, args.n, args.k) if None not in (args.m, args.n, args.k) else None
    return {
        "nbytes": nbytes, "group": args.group or 1, "gpus_per_node": args.gpus_per_node,
        "algorithm": args.algorithm, "doc_lengths": doc_lengths(args), "heads": args.heads,
        "kv_heads": args.kv_heads, "head_dim": args.head_dim, "cp": args.cp,
        "backward": args.backward, "gemm": gemm, "dtype": args.dtype,
        "profile": args.profile, "topology": args.topology, "efficiency": not args.no_fit,
        "profile_scope": args.profile_scope,
    }


def handle(args: argparse.Namespace) -> int:
    op = {o.name: o for o in api.cost_ops()}.get(args.op)
    if op is None:
        raise InputError("--op", args.op, " | ".join(api.cost_choices()["op"]))
    check_flags(args)
    require(args, op.needs)
    if op.sized and args.bytes is None:
        result, text = sweep(args)
    else:
        report = api.cost_report(args.op, **query(args, args.bytes))
        result, text = report.fields, report.text
    check_numbers(result)  # a non-finite or negative answer is a bug, never printed
    print(dumps(result) if args.json else text)
    return 0


#: Sizes of the default sweep when ``--bytes`` is not given (nccl-tests style, 1 KiB-1 GiB).
SWEEP_BYTES = tuple(float(2**k) for k in range(10, 31, 2))


def sweep(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """Without ``--bytes``: every size of :data:`SWEEP_BYTES`; ``tier`` is the worst row's."""
    rows, lines = [], []
    for size in SWEEP_BYTES:
        report = api.cost_report(args.op, **query(args, size))
        rows.append({"bytes": size, **report.fields})
        lines.append(report.text)
    order = ("measured", "borrowed", "datasheet")
    worst = max((str(r["tier"]) for r in rows), key=order.index)
    return {"tier": worst, "rows": rows}, "\n".join(lines)
