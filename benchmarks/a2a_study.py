"""All-to-all at scale: per-GPU time against peers, nodes and message size on every shipped
topology with more than one node, beside the public points the model's constants use.

    python benchmarks/a2a_study.py [--plot a2a_study.png] [--mechanisms]
        [--width docs/figures/a2a_width.png]

Per-GPU bytes are nccl-tests' ``size`` (what each rank sends in total, its own share included).
Tables (markdown):

1. per-GPU time at fixed per-GPU bytes (64 MiB) against the node count (more remote peers,
   smaller messages each), and the per-NIC rate of the cross-node bytes;
2. per-GPU time against the per-GPU bytes on 8 nodes (64 GPUs), the protocol of one message;
3. with ``--mechanisms``: what each mechanism adds on ``h200-roce-railopt-2to1`` (each
   switched off in turn, ``hardware/collectives/alltoall.py``'s ``Mechanisms``);
4. the public points (``calibration/public/alltoall-efficiency.csv``) beside the model on the
   closest shipped topology.

``--plot`` draws tables 1 and 2 (matplotlib imported only then). ``--width`` draws the
cross-node rate per GPU (one NIC each) against the node count at 1 GiB per GPU, with every
public point of the CSV that names its node count (the incast fit's points filled).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
from pathlib import Path

from libra_des.hardware.collectives.alltoall import Mechanisms
from libra_des.hardware.costs import CostModel
from libra_des.hardware.fabric.topology import load_topology, shipped_topologies
from libra_des.hardware.profiles.profile import load_profile

ROOT = Path(__file__).resolve().parents[1]
NODES = (2, 4, 8, 16, 32, 64, 128)
SIZES = tuple(2**k for k in range(16, 33, 2))  # 64 KiB ... 4 GiB per GPU
MIB = 2**20


def model(topology: str, nodes: int, **off: object) -> CostModel:
    fabric = load_topology(topology, {"nodes": nodes}).fabric()
    cost = CostModel(load_profile("h200-sxm"), fabric)
    cost.a2a_on = dataclasses.replace(Mechanisms(), **off)  # type: ignore[arg-type]
    return cost


def topologies() -> list[str]:
    return [t for t in shipped_topologies() if load_topology(t, {}).fabric().nodes > 1]


def per_gpu(topology: str, nodes: int, nbytes: float, **off: object) -> float:
    cost = model(topology, nodes, **off)
    return cost.collective("all_to_all", nbytes, cost.fabric.gpus_per_node * nodes).seconds


def nic_rate(topology: str, nodes: int, nbytes: float) -> float:
    """GB/s per NIC of the cross-node bytes (one NIC per GPU)."""
    secs = per_gpu(topology, nodes, nbytes)
    return nbytes * (nodes - 1) / nodes / secs / 1e9


def node_table() -> dict[str, list[float]]:
    out = {}
    for topo in topologies():
        out[topo] = [per_gpu(topo, n, 64 * MIB) if fits(topo, n) else float("nan")
                     for n in NODES]
    return out


def fits(topology: str, nodes: int) -> bool:
    try:
        load_topology(topology, {"nodes": nodes}).fabric()
    except Exception:
        return False
    return True


def size_table(nodes: int = 8) -> dict[str, list[float]]:
    return {t: [per_gpu(t, nodes, s) for s in SIZES] for t in topologies() if fits(t, nodes)}


def mechanism_table(topology: str = "h200-roce-railopt-2to1") -> list[tuple[str, list[float]]]:
    rows = [("all on", [per_gpu(topology, n, 64 * MIB) for n in (2, 8, 32, 128)])]
    # ECMP "off" is a factor of 1 (no collisions, as per-packet spraying would give).
    for name, off in (("size_efficiency", False), ("per_peer", False), ("pxn", False),
                      ("incast", False), ("ecmp", 1.0)):
        rows.append((f"{name} off", [per_gpu(topology, n, 64 * MIB, **{name: off})
                                     for n in (2, 8, 32, 128)]))
    return rows


def public_points() -> list[dict[str, str]]:
    text = (ROOT / "calibration" / "public" / "alltoall-efficiency.csv").read_text()
    return list(csv.DictReader(ln for ln in text.splitlines() if not ln.startswith("#")))


def print_tables(mechanisms: bool) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    nodes = node_table()
    print("Per-GPU all-to-all time (ms), 64 MiB per GPU, against nodes (8 GPUs per node "
          "unless the topology has more):\n")
    print("| topology | " + " | ".join(str(n) for n in NODES) + " |")
    print("| --- |" + " --- |" * len(NODES))
    for topo, row in nodes.items():
        print(f"| {topo} | " + " | ".join(f"{t * 1e3:.2f}" for t in row) + " |")
    sizes = size_table()
    print("\nPer-GPU time (ms) on 8 nodes against per-GPU bytes:\n")
    print("| topology | " + " | ".join(human(s) for s in SIZES) + " |")
    print("| --- |" + " --- |" * len(SIZES))
    for topo, row in sizes.items():
        print(f"| {topo} | " + " | ".join(f"{t * 1e3:.3f}" for t in row) + " |")
    if mechanisms:
        print("\nEach mechanism off in turn, h200-roce-railopt-2to1, 64 MiB per GPU (ms; "
              "nodes 2, 8, 32, 128):\n")
        print("| mechanisms | 2 | 8 | 32 | 128 |\n| --- | --- | --- | --- | --- |")
        for name, row in mechanism_table():
            print(f"| {name} | " + " | ".join(f"{t * 1e3:.2f}" for t in row) + " |")
    print("\nPublic points (calibration/public/alltoall-efficiency.csv):\n")
    print("| source | used | per-NIC GB/s (public) |\n| --- | --- | --- |")
    for row in public_points():
        print(f"| {row['source']} | {row['used']} | {row['per_nic_gbs']} |")
    print("\nModel beside them: h100-ib-ndr 6 nodes, 1 GiB per GPU: "
          f"{nic_rate('h100-ib-ndr', 6, 2**30):.1f} GB/s per NIC (public 48-49); "
          f"8 nodes, 8 MiB per GPU: {per_gpu('h100-ib-ndr', 8, 8 * MIB) * 1e6:.0f} us "
          "(public 337.8 us on 8 H800 nodes, NVIDIA/nccl#1531).")
    return nodes, sizes


def human(nbytes: int) -> str:
    return f"{nbytes // MIB} MiB" if nbytes >= MIB else f"{nbytes // 1024} KiB"


def plot(path: Path, nodes: dict[str, list[float]], sizes: dict[str, list[float]]) -> None:
    import matplotlib  # lazily: the study's tables need no plotting library

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for topo, row in nodes.items():
        a.plot(NODES, [t * 1e3 for t in row], marker="o", label=topo)
    a.set(xscale="log", yscale="log", xlabel="nodes (peers = 8 x nodes - 8)",
          ylabel="per-GPU all-to-all (ms), 64 MiB per GPU")
    for topo, row in sizes.items():
        b.plot(SIZES, [s / t / 1e9 * 7 / 8 for s, t in zip(SIZES, row, strict=True)],
               marker="o", label=topo)
    b.axhline(48, color="k", ls="--", lw=0.8)
    b.annotate("public: 48-49 GB/s per CX-7 (nccl-tests#267)", (SIZES[0], 49), fontsize=7)
    b.scatter([8 * MIB], [8 * MIB * 7 / 8 / 337.8e-6 / 1e9], color="k", zorder=5)
    b.annotate("nccl#1531 (8 H800 nodes)", (8 * MIB, 22), fontsize=7)
    b.set(xscale="log", xlabel="bytes per GPU (8 nodes)", ylabel="cross-node GB/s per NIC")
    a.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"\nwrote {path}")


WIDTH_NODES = (2, 3, 4, 6, 8, 12, 16, 24, 32, 64)


def width_curve(topology: str = "h100-ib-ndr", nbytes: float = 2.0**30) -> list[float]:
    """Cross-node GB/s per GPU (its NIC) of a uniform all-to-all against :data:`WIDTH_NODES`."""
    return [nic_rate(topology, n, nbytes) for n in WIDTH_NODES]


def plot_width(path: Path) -> None:
    import matplotlib  # lazily: the study's tables need no plotting library

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for topo in ("h100-ib-ndr", "h200-roce-railopt"):
        ax.plot(WIDTH_NODES, width_curve(topo), marker="o", ms=3, label=f"model, {topo}, 1 GiB")
    for row in public_points():
        if not row.get("nodes"):
            continue
        fit = row["used"] == "fit"
        ax.scatter([int(row["nodes"])], [float(row["per_nic_gbs"])], zorder=5,
                   marker="o" if fit else "x", color="k" if fit else "grey")
        label = row["source"].split("github.com/")[-1].split(" (")[0]
        ax.annotate(f"{label} ({row['used']})", (int(row["nodes"]), float(row["per_nic_gbs"])),
                    fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set(xscale="log", xlabel="nodes (8 GPUs each)", ylabel="cross-node GB/s per GPU (NIC)",
           title="All-to-all per NIC against width (400 Gb/s NICs)")
    ax.set_xticks(WIDTH_NODES, [str(n) for n in WIDTH_NODES])
    ax.minorticks_off()
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"wrote {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--plot", type=Path, default=None)
    ap.add_argument("--mechanisms", action="store_true")
    ap.add_argument("--width", type=Path, default=None)
    args = ap.parse_args()
    if args.width is not None:
        plot_width(args.width)
        return
    nodes, sizes = print_tables(args.mechanisms)
    if args.plot is not None:
        plot(args.plot, nodes, sizes)


if __name__ == "__main__":
    main()
