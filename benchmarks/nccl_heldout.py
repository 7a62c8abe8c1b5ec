"""Held-out splits of the collective model on the public H200 nccl-tests logs.

    python benchmarks/nccl_heldout.py [--data ../shared/data/nccl-tests-h200x8]

Every row reports a median |error| over the log's sizes (8 MB-8 GB, one 8x H200 node):

- ``no fit``: NCCL's tuning model on the datasheet link rates (the datasheet tier);
- ``sizes``: the profile fitter on each log's even-indexed sizes, predicting the odd ones
  (the measured tier);
- ``group 2 -> 8``: fit on the 2-GPU log, predict the 8-GPU one. A ring of ``n`` ranks takes
  ``n - 1`` link steps; on 2 GPUs the one step *is* the last one, which for reduce_scatter
  reduces into the user's output buffer (NCCL's ``recvReduceCopy``) and for all_gather copies
  out of the receive buffer. The 2-GPU log's measured/predicted ratio per size is therefore
  the last step's, and is carried to ``n`` ranks on that step only:
  ``T_n = model_n x ((n - 2) + r_2) / (n - 1)``. Carrying the ratio to every step (``whole``)
  is shown beside it: reduce_scatter's 2-GPU log runs about 1.3x the ring model while its
  8-GPU log is within 5%, which only the last-step reading explains.

The test ``tests/test_nccl_heldout.py`` asserts the same splits stay within 15%.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from libra_des.hardware.costs import CostModel
from libra_des.hardware.fabric.topology import load_topology
from libra_des.hardware.profiles.fitting import fit_profile
from libra_des.hardware.profiles.importers import import_nccl_tests
from libra_des.hardware.profiles.profile import Sample, load_profile

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "nccl-tests-h200x8"
LOGS = ("all_gather", "all_reduce", "reduce_scatter")
RINGS = ("all_gather", "reduce_scatter")  # the ring collectives the group carry applies to


def samples(data: Path, op: str, gpus: int) -> list[Sample]:
    rows = import_nccl_tests(data / f"{op}-{gpus}gpu.perf.txt").samples
    return sorted(rows, key=lambda s: s.nbytes or 0)


def datasheet_model() -> CostModel:
    prof = load_profile("h200-sxm").model_copy(update={"fits": (), "samples": ()})
    return CostModel(prof, load_topology("h200-8x-nvswitch", {}).fabric())


def median_abs(errors: list[float]) -> float:
    return float(np.median(np.abs(errors)))


def no_fit(data: Path, op: str, gpus: int) -> float:
    model = datasheet_model()
    rows = samples(data, op, gpus)
    return median_abs([model.collective(op, s.nbytes or 0, gpus).seconds / s.time.median - 1
                       for s in rows])


def sizes_split(data: Path, op: str, gpus: int) -> float:
    """Fit the even-indexed sizes (measured tier), predict the odd ones."""
    base = load_profile("h200-sxm").model_copy(update={"fits": (), "samples": ()})
    rows = samples(data, op, gpus)
    fitted, _ = fit_profile(base.with_samples(tuple(rows[0::2])))
    model = CostModel(fitted, load_topology("h200-8x-nvswitch", {}).fabric())
    return median_abs([model.collective(op, s.nbytes or 0, gpus).seconds / s.time.median - 1
                       for s in rows[1::2]])


def group_split(data: Path, op: str, last_step: bool = True, to: int = 8) -> float:
    """Fit the 2-GPU log (its measured/predicted ratio per size), predict ``to`` GPUs."""
    model = datasheet_model()
    ratio = {s.nbytes: s.time.median / model.collective(op, s.nbytes or 0, 2).seconds
             for s in samples(data, op, 2)}
    errors = []
    for s in samples(data, op, to):
        if s.nbytes not in ratio:
            continue
        r = ratio[s.nbytes]
        carry = ((to - 2) + r) / (to - 1) if last_step else r
        errors.append(model.collective(op, s.nbytes or 0, to).seconds * carry / s.time.median - 1)
    return median_abs(errors)


def table(data: Path) -> list[tuple[str, str, str]]:
    rows = []
    for op in LOGS:
        for gpus in (2, 8):
            group = ""
            if gpus == 8 and op in RINGS:
                group = (f"{group_split(data, op):.1%} (whole: "
                         f"{group_split(data, op, last_step=False):.1%})")
            rows.append((f"{op} {gpus} GPUs", f"{no_fit(data, op, gpus):.1%}",
                         f"{sizes_split(data, op, gpus):.1%}" + (f" | {group}" if group else "")))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    args = ap.parse_args()
    if not (args.data / "all_gather-2gpu.perf.txt").is_file():
        print(f"skipped: {args.data} is absent")
        return
    print("| log | no fit | held-out sizes | held-out group 2 -> 8 (last step) |")
    print("| --- | --- | --- | --- |")
    for name, fit, rest in table(args.data):
        sizes, _, group = rest.partition(" | ")
        print(f"| {name} | {fit} | {sizes} | {group} |")


if __name__ == "__main__":
    main()
