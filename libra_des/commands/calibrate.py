"""``libra-des calibrate``: measure this node with torch, fit, cross-validate, draw.

    libra-des calibrate [--device auto|cuda|cpu] [--world N] [--quick] [--ops A,B,...]
        [--base auto|NAME] [--seed S] [--out DIR] [--no-preflight]

Writes ``DIR/profile.json`` (samples, fits with their cross-validation errors, interference
cases, and the device, GPU count and interconnect it was measured on) and
``DIR/validation.html``. torch is imported only when the command runs: ``--help`` and the
no-torch message never load it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from libra_des.api.calibration import calibrate_node, calibration_ops, torch_missing
from libra_des.api.outputs import check_output_dir

OUTPUTS = ("profile.json", "validation.html")


def register(subs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subs.add_parser("calibrate", help="measure this node (torch) into a fitted profile")
    p.add_argument("--device", default="auto", help="auto | cuda | cpu (auto: CUDA if seen)")
    p.add_argument("--world", type=int, default=None,
                   help="ranks: gloo processes on a CPU (default 2), GPUs with NCCL (all)")
    p.add_argument("--quick", action="store_true", help="the quick size set")
    ops = ",".join(calibration_ops())
    p.add_argument("--ops", default=ops, help=ops)
    p.add_argument("--base", default="auto", help="datasheet profile (auto: from the device)")
    p.add_argument("--seed", type=int, default=0, help="seed of the long-tailed length mixes")
    p.add_argument("--out", default="runs/calibrate", help="output folder (profile.json, "
                   "validation.html)")
    p.add_argument("--no-preflight", action="store_true",
                   help="run more gloo ranks than this machine has CPU cores (oversubscribed)")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    missing = torch_missing()
    if missing is not None:
        sys.stderr.write(missing + "\n")
        return 2
    out = Path(args.out)
    check_output_dir(out, "--out", OUTPUTS)
    return calibrate_node(args.device, args.ops, args.world, "quick" if args.quick else "full",
                          args.base, args.seed, out / OUTPUTS[0], out / OUTPUTS[1],
                          out.name or "profile", not args.no_preflight)
