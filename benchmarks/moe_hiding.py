"""Where hiding stops: Libra's prefill gain over SGLang and EPLB, and its exposed host time,
across input length, batch size and host CPU speed (the ``moe_hiding`` figure's study).

Draws the figure (PNG, PDF and the CSV of every cell) into ``--out`` (``docs/figures/
moe_hiding.{png,csv}`` are copies of a ``--quick`` run) and prints, per batch
size and host speed, the cells and the input length where Libra's gain over each baseline
turns positive (log-linear between grid points; "never" when it does not on the grid).

    nice .venv/bin/python benchmarks/moe_hiding.py --quick     # about 40 s on 2 cores
    nice .venv/bin/python benchmarks/moe_hiding.py             # 16 layers, 2 batches, 3 seeds
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from paper_figs import common
from paper_figs.libra_moe import hiding


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="8 layers, 1 batch, a small grid")
    parser.add_argument("--out", type=Path, default=Path("out/moe_hiding"),
                        help="a new or empty folder (or one of an earlier run)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    opts = common.FigOptions(args.out, quick=args.quick, workers=args.workers)
    drawn = hiding.make(opts)
    table = next(f for f in drawn.files if f.suffix == ".csv")
    with table.open() as fh:
        data = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(fh)]
    print("| batch | host x | seq_len | tokens/GPU | over SGLang % | over EPLB % | host ms | "
          "exposed host ms | MoE_local ms | exposed copies ms |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in sorted(data, key=lambda r: (r["batch"], r["host_factor"], r["seq_len"])):
        print(f"| {r['batch']:g} | {r['host_factor']:g} | {r['seq_len']:g} | "
              f"{r['tokens_per_gpu']:g} | {r['gain_over_sglang_percent']:+.1f} | "
              f"{r['gain_over_eplb_percent']:+.1f} | "
              f"{r['libra_host_ms']:.2f} | {r['libra_exposed_host_ms']:.2f} | "
              f"{r['libra_moe_local_ms']:.2f} | {r['libra_exposed_copy_ms']:.2f} |")
    print("\ninput length where Libra's gain turns positive:")
    for b in sorted({r["batch"] for r in data}):
        for f in sorted({r["host_factor"] for r in data}):
            cell = sorted((r for r in data if r["batch"] == b and r["host_factor"] == f),
                          key=lambda r: r["seq_len"])
            xs = [r["seq_len"] for r in cell]
            found = {o: hiding.crossing(xs, [r[f"gain_over_{o}_percent"] for r in cell])
                     for o in ("sglang", "eplb")}
            text = ", ".join(f"over {o}: {'never' if x is None else f'{x:.0f} tokens'}"
                             for o, x in found.items())
            print(f"  batch {b:g}, host x{f:g}: {text}")
    print("\n" + "\n".join(str(p) for p in drawn.files))


if __name__ == "__main__":
    main()
