"""The communication model against every public measurement it was compared with: the
validation table of docs/communication.md (source, measurement, prediction, error, tier).

    python benchmarks/comm_validation.py

Inputs: ``../shared/data`` (the H200 nccl-tests logs, Vidur's send_recv files; rows whose
file is absent are skipped) and the all-to-all points of
``calibration/public/alltoall-efficiency.csv`` (their ``used`` column says which fitted the
incast constant: those rows are in-sample). Every price is the datasheet tier (profiles with
their fits removed), so the table checks the mechanisms, not a fit of the same data.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from libra_des.hardware.collectives.curves import busbw_factor
from libra_des.hardware.costs import CostModel
from libra_des.hardware.fabric.topology import load_topology
from libra_des.hardware.profiles.importers import import_nccl_tests
from libra_des.hardware.profiles.profile import load_profile

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
MIB = 2**20
#: One row: source, what was measured, measured value, predicted value, unit, tier, note.
Row = tuple[str, str, float, float, str, str, str]


def bare(profile: str, topology: str, params: dict[str, object] | None = None) -> CostModel:
    """The profile without its fits (the datasheet tier) on a shipped topology."""
    prof = load_profile(profile).model_copy(update={"fits": (), "samples": ()})
    return CostModel(prof, load_topology(topology, params or {}).fabric())


def nccl_tests_rows() -> Iterator[Row]:
    """The largest size of each H200 log (one 8x H200 node, 2 and 8 GPUs): bus bandwidth."""
    m = bare("h200-sxm", "h200-8x-nvswitch")
    for op in ("all_reduce", "all_gather", "reduce_scatter"):
        for gpus in (2, 8):
            path = DATA / "nccl-tests-h200x8" / f"{op}-{gpus}gpu.perf.txt"
            if not path.is_file():
                continue
            big = max(import_nccl_tests(path).samples, key=lambda s: s.nbytes or 0)
            res = m.collective(op, big.nbytes or 0, gpus)
            measured = (big.nbytes or 0) / big.time.median * busbw_factor(op, gpus) / 1e9
            yield ("distca nccl-tests H200 (shared/data)", f"{op} {gpus} GPUs, "
                   f"{(big.nbytes or 0) / 2**30:.0f} GiB busbw", measured, res.busbw_gbs,
                   "GB/s", res.tier, f"NCCL's choice: {res.algorithm}/{res.protocol}")


def vidur_rows() -> Iterator[Row]:
    """64 MiB send_recv between two GPUs of one DGX node (GB/s)."""
    for profile, topology, name in (("h100-sxm", "h100-ib-ndr", "h100_dgx_send_recv.csv"),
                                    ("a100-sxm", "a100-dgx-ib-hdr", "a100_dgx_send_recv.csv")):
        path = DATA / "vidur-profiles" / name
        if not path.is_file():
            continue
        rows = [r for r in csv.DictReader(path.open()) if r["devices_per_node"] == "2"]
        big = max(rows, key=lambda r: float(r["size"]))
        size = float(big["size"])
        measured = size / (float(big["time_stats.send_recv.median"]) * 1e-3) / 1e9
        m = bare(profile, topology)
        yield (f"Vidur {name}", "send_recv 2 GPUs in a node, 64 MiB", measured,
               size / m.p2p(size, True) / 1e9, "GB/s", "datasheet", "NCCL p2p channels")


def a2a_rows() -> Iterator[Row]:
    """The public all-to-all points that name a node count: per-NIC GB/s at 1 GiB per GPU
    (NVIDIA/nccl#1531 at its own 8 MiB per GPU), on h100-ib-ndr (400 Gb/s NICs)."""
    text = (ROOT / "calibration" / "public" / "alltoall-efficiency.csv").read_text()
    for r in csv.DictReader(ln for ln in text.splitlines() if not ln.startswith("#")):
        if not r.get("nodes") or r["used"] not in ("fit", "yes", "check"):
            continue
        nodes = int(r["nodes"])
        size = 8.0 * MIB if "1531" in r["source"] else 2.0**30
        m = bare("h100-sxm", "h100-ib-ndr", {"nodes": nodes})
        res = m.collective("all_to_all", size, 8 * nodes)
        per_nic = size * (nodes - 1) / nodes / res.seconds / 1e9
        note = {"fit": "in-sample (fits the incast constant)",
                "check": "out of sample; small messages (per-peer terms)"}.get(
            r["used"], "a ceiling the maintainers state, not a run at this width")
        yield (r["source"], f"all_to_all {nodes} nodes x 8, {size / MIB:.0f} MiB per GPU, "
               "per NIC", float(r["per_nic_gbs"]), per_nic, "GB/s", res.tier, note)


def rows() -> list[Row]:
    return [*nccl_tests_rows(), *vidur_rows(), *a2a_rows()]


def main() -> None:
    print("| source | measured | public | model | error | tier | note |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for src, what, measured, predicted, unit, tier, note in rows():
        err = predicted / measured - 1
        print(f"| {src} | {what} | {measured:.1f} {unit} | {predicted:.1f} {unit} | "
              f"{err:+.1%} | {tier} | {note} |")


if __name__ == "__main__":
    main()
