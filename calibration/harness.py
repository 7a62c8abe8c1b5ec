"""Measure kernels and collectives with torch and write a fitted calibration profile.

    python -m calibration.harness --out PROFILE.json [--device auto|cuda|cpu]
        [--ops attention,gemm,grouped_gemm,all_reduce,all_gather,reduce_scatter,all_to_all,
        send_recv] [--world N] [--sizes quick|full] [--base auto|NAME] [--seed S]
        [--page validation.html] [--cv]

The harness's own entry, kept beside ``libra-des calibrate`` (which writes a folder with the
profile and ``validation.html``). Both run :mod:`libra_des.calibrate`, whose modules describe
the measurement method; this file only parses its command line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from libra_des.calibrate.kernels import tailed_mix
from libra_des.calibrate.sizes import ALL_OPS, COLLECTIVES, KERNEL_OPS, SIZE_SETS, SOURCE
from libra_des.errors import InputError

__all__ = ["ALL_OPS", "COLLECTIVES", "KERNEL_OPS", "SIZE_SETS", "SOURCE", "main", "tailed_mix"]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m calibration.harness",
        description="Measure kernels and collectives with torch and write a fitted profile.",
        epilog="examples:\n"
        "  python -m calibration.harness --out h200.json             # all GPUs, quick sizes\n"
        "  python -m calibration.harness --out cpu.json --device cpu --world 2\n"
        "  python -m calibration.harness --out a.json --ops attention,gemm --sizes full\n"
        "libra-des calibrate does the same into a folder, with validation.html.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", required=True, help="profile JSON to write")
    p.add_argument("--device", default="auto", help="auto | cuda | cpu")
    p.add_argument("--ops", default=",".join(ALL_OPS), help=",".join(ALL_OPS))
    p.add_argument("--world", type=int, default=None, help="ranks (gloo: 2; NCCL: all GPUs)")
    p.add_argument("--sizes", default="quick", help="quick | full")
    p.add_argument("--base", default="auto", help="datasheet profile (auto: from the device)")
    p.add_argument("--seed", type=int, default=0, help="seed of the long-tailed length mixes")
    p.add_argument("--page", default=None, help="also write this validation.html")
    p.add_argument("--cv", action="store_true", help="cross-validate the fits (leave one out)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # After parsing, so --help stays quick (the run module loads scipy's fitting code).
    from libra_des.calibrate.run import calibrate, fail, options, torch_missing

    missing = torch_missing()
    if missing is not None:
        sys.stderr.write(missing + "\n")
        return 2
    try:
        out = Path(args.out)
        opt = options(args.device, args.ops, args.world, args.sizes, args.base, args.seed,
                      out.stem)
        page = Path(args.page) if args.page else None
        return calibrate(opt, out, page, cv=args.cv)
    except InputError as exc:
        return fail(exc)


if __name__ == "__main__":
    raise SystemExit(main())
