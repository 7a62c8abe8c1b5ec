"""NCCL's tuning model as the datasheet tier: choices, overrides, and errors on public logs.

Public data: ``../shared/data/nccl-tests-h200x8`` (one 8x H200 node, 2 and 8 GPUs, 8 MB-8 GB).
Every comparison reports its median |error| (printed with ``-s``; the figures are in
docs/communication.md). Held-out splits: (a) sizes: fit each log on every other size, predict
the rest; (b) group sizes, 2 -> 8 GPUs: ``tests/test_nccl_heldout.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from libra_des.cli import main
from libra_des.errors import InputError
from libra_des.hardware.collectives import collective_ops
from libra_des.hardware.collectives.nccl_tuner import NcclTuner, check_override
from libra_des.hardware.costs import CostModel
from libra_des.hardware.fabric.topology import load_topology
from libra_des.hardware.profiles.fitting import fit_profile
from libra_des.hardware.profiles.importers import import_nccl_tests
from libra_des.hardware.profiles.profile import COLLECTIVE_OPS, Sample, load_profile

ROOT = Path(__file__).resolve().parents[1]
NCCL = ROOT.parent / "shared" / "data" / "nccl-tests-h200x8"
LOGS = ("all_gather", "all_reduce", "reduce_scatter")


def h200() -> CostModel:
    prof = load_profile("h200-sxm").model_copy(update={"fits": (), "samples": ()})
    return CostModel(prof, load_topology("h200-8x-nvswitch", {}).fabric())


def samples(op: str, gpus: int) -> list[Sample]:
    path = NCCL / f"{op}-{gpus}gpu.perf.txt"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    return sorted(import_nccl_tests(path).samples, key=lambda s: s.nbytes or 0)


def median_abs(errors: list[float]) -> float:
    return float(np.median(np.abs(errors)))


# ----------------------------------------------------------------------------- choices
def test_ll_at_small_sizes_simple_at_large_and_nvls_on_nvswitch() -> None:
    model = h200()
    for op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"):
        small = model.collective(op, 1024, 8)
        large = model.collective(op, 2**30, 8)
        assert small.protocol == "LL", (op, small)
        assert large.protocol == "Simple", (op, large)
    assert model.collective("all_reduce", 2**30, 8).algorithm == "nvls"
    assert model.collective("all_gather", 2**30, 8).algorithm == "ring"
    pcie = CostModel(load_profile("h200-sxm"), load_topology("pcie-8x", {}).fabric())
    assert pcie.collective("all_reduce", 2**30, 8).algorithm != "nvls"
    # Across nodes: NVLS-tree on the rail-optimised H200 fabric at large sizes.
    big = CostModel(load_profile("h200-sxm"), load_topology("h200-roce-railopt", {}).fabric())
    assert big.collective("all_reduce", 2**30, 64).algorithm == "nvls_tree"


def test_each_pair_has_latency_and_bandwidth_shapes() -> None:
    """Latency grows with hops (ranks), LL's bandwidth is capped below Simple's."""
    tuner = h200().tuner
    assert tuner is not None
    by = {(e.algorithm, e.protocol): e for e in tuner.table("all_reduce", 8, 8)}
    assert by["ring", "LL"].latency_us < by["ring", "LL128"].latency_us < by[
        "ring", "Simple"].latency_us
    assert by["ring", "LL"].bandwidth_gbs < by["ring", "LL128"].bandwidth_gbs < by[
        "ring", "Simple"].bandwidth_gbs
    four = {(e.algorithm, e.protocol): e for e in tuner.table("all_reduce", 4, 4)}
    assert four["ring", "Simple"].latency_us < by["ring", "Simple"].latency_us
    # Closed form of the ring LL latency: base 6.6 us + 2 (n - 1) NVLink hops of 0.6 us.
    assert by["ring", "LL"].latency_us == pytest.approx(6.6 + 14 * 0.6)


def test_small_calls_launch_fewer_channels() -> None:
    model = h200()
    assert model.collective("all_gather", 4096, 8).channels < model.collective(
        "all_gather", 2**30, 8).channels


def test_collnet_and_pat_only_where_the_topology_allows() -> None:
    prof = load_profile("h200-sxm")
    fab = load_topology("h100-ib-ndr", {"nodes": 8}).fabric()
    tuner = NcclTuner(fab, prof.device, 0.96, prof.interconnect.nvls_ops)
    assert "pat" in tuner.algorithms("all_gather", 8, 1)
    assert "pat" not in tuner.algorithms("all_gather", 64, 8)
    assert not any(a.startswith("collnet") for a in tuner.algorithms("all_reduce", 64, 8))
    sharp = NcclTuner(type(fab)(**{**fab.__dict__, "collnet": True}), prof.device, 0.96)
    assert "collnet_direct" in sharp.algorithms("all_reduce", 64, 8)


# ----------------------------------------------------------------------------- overrides
def test_overrides_restrict_the_choice() -> None:
    prof = load_profile("h200-sxm").model_copy(update={"fits": ()})
    fab = load_topology("h200-8x-nvswitch", {}).fabric()
    ring = CostModel(prof, fab, comm=("ring", None)).collective("all_reduce", 2**30, 8)
    assert ring.algorithm == "ring"
    simple = CostModel(prof, fab, comm=(None, "Simple")).collective("all_reduce", 1024, 8)
    assert simple.protocol == "Simple"
    auto = CostModel(prof, fab).collective("all_reduce", 1024, 8)
    assert simple.seconds > auto.seconds


@pytest.mark.parametrize(
    ("topology", "algorithm", "protocol", "field"),
    [
        ("h200-8x-nvswitch", "fastest", None, "comm.algorithm"),
        ("pcie-8x", "nvls", None, "comm.algorithm"),
        ("h200-8x-nvswitch", "collnet_direct", None, "comm.algorithm"),
        ("pcie-8x", None, "LL128", "comm.protocol"),
        ("h200-8x-nvswitch", None, "LL256", "comm.protocol"),
    ],
)
def test_bad_overrides_are_bad_input(
    topology: str, algorithm: str | None, protocol: str | None, field: str
) -> None:
    with pytest.raises(InputError) as err:
        check_override(load_topology(topology, {}).fabric(), algorithm, protocol)
    assert err.value.field == field


@pytest.mark.parametrize(
    ("sets", "field"),
    [
        (["topology=pcie-8x", "comm.algorithm=nvls"], "comm.algorithm"),  # NVLS on PCIe
        (["comm.algorithm=fastest"], "comm.algorithm"),  # unknown algorithm
        (["topology=pcie-8x", "comm.protocol=LL128"], "comm.protocol"),  # not over PCIe
        (["comm.protocol=LL256"], "comm.protocol"),  # unknown protocol
    ],
)
def test_bad_comm_settings_are_one_line_and_exit_2(
    sets: list[str], field: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = [a for kv in sets for a in ("--set", kv)]
    code = main(["run", str(ROOT / "scenarios" / "quickstart.yaml"), *args,
                 "--out", str(tmp_path / "never")])
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert code == 2 and len(err) == 1 and field in err[0], err
    assert "Traceback" not in captured.err and not (tmp_path / "never").exists()


def test_bad_cost_algorithm_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["cost", "--op", "all_reduce", "--group", "8", "--bytes", "1024",
                 "--topology", "pcie-8x", "--algorithm", "nvls"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err


def test_cost_json_reports_algorithm_protocol_channels(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import json

    assert main(["cost", "--op", "all_gather", "--group", "8", "--bytes", "1048576",
                 "--topology", "h200-8x-nvswitch", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"algorithm", "protocol", "channels"} <= set(out) and out["channels"] >= 1


def test_every_op_is_registered_once() -> None:
    assert set(collective_ops.names()) == set(COLLECTIVE_OPS)
    with pytest.raises(InputError):
        collective_ops.get("all_to_some")


# ----------------------------------------------------------------------------- public data
def test_nccl_model_predicts_the_h200_logs() -> None:
    """No fit: NCCL's tuning model on the datasheet link rates against each log."""
    model = h200()
    report = {}
    for op in LOGS:
        for gpus in (2, 8):
            rows = samples(op, gpus)
            errors = [model.collective(op, s.nbytes or 0, gpus).seconds / s.time.median - 1
                      for s in rows]
            report[f"{op}-{gpus}"] = median_abs(errors)
    print("NCCL model, no fit, median |error|:", {k: round(v, 3) for k, v in report.items()})
    # Ring collectives and all_reduce (NVLS from NCCL's NVLS graph at 8 GPUs, ring at 2)
    # within 10%; the 2-GPU reduce_scatter log runs its last step slow (test_nccl_heldout).
    for key in ("all_gather-2", "all_gather-8", "reduce_scatter-8", "all_reduce-2",
                "all_reduce-8"):
        assert report[key] < 0.10, report
    assert max(report.values()) < 0.45, report


def test_held_out_sizes_stay_within_15_percent() -> None:
    """Fit each log's even-indexed sizes (the profile fitter), predict the odd ones."""
    base = load_profile("h200-sxm").model_copy(update={"fits": (), "samples": ()})
    fab = load_topology("h200-8x-nvswitch", {}).fabric()
    report = {}
    for op in LOGS:
        for gpus in (2, 8):
            rows = samples(op, gpus)
            train, test = rows[0::2], rows[1::2]
            fitted, _ = fit_profile(base.with_samples(tuple(train)))
            model = CostModel(fitted, fab)
            errors = [model.collective(op, s.nbytes or 0, gpus).seconds / s.time.median - 1
                      for s in test]
            assert model.collective(op, test[0].nbytes or 0, gpus).tier == "measured"
            report[f"{op}-{gpus}"] = median_abs(errors)
    print("held-out sizes, median |error|:", {k: round(v, 3) for k, v in report.items()})
    assert max(report.values()) < 0.15, report


def test_all_to_all_breakdown_names_each_mechanism_and_grows_with_nodes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Fixed per-GPU bytes: more nodes, more remote peers, more per-peer latency and time."""
    import json

    rows = []
    for n in (16, 64, 256):
        assert main(["cost", "--op", "all_to_all", "--group", str(n), "--bytes", "67108864",
                     "--topology", "h200-roce-railopt-2to1", "--json"]) == 0
        rows.append(json.loads(capsys.readouterr().out))
    names = {"message_size_efficiency", "per_peer_latency_s", "once_latency_s",
             "one_nic_per_gpu_gbs", "node_share_s", "incast", "spine_share", "pxn", "ecmp"}
    assert all(names <= set(r["breakdown"]) for r in rows)
    secs = [r["seconds"] for r in rows]
    lat = [r["breakdown"]["per_peer_latency_s"] for r in rows]
    assert secs[0] < secs[1] < secs[2] and lat[0] < lat[1] < lat[2]
    # Smaller messages per peer on wider groups: never a better message-size efficiency.
    eff = [r["breakdown"]["message_size_efficiency"] for r in rows]
    assert eff[2] <= eff[0] + 1e-12
    # 2:1 rail-optimised: PXN moves the 7 of 8 cross-rail messages per peer node onto the
    # destination's rail, so inside one leaf group (32 nodes) nothing crosses the spine.
    assert rows[0]["breakdown"]["pxn"]["rerouted_share"] == pytest.approx(7 / 8)
    assert rows[2]["breakdown"]["spine_share"] == 0.0


def test_all_to_all_has_its_own_efficiency_from_all_to_all_evidence() -> None:
    import csv

    from libra_des.hardware.collectives.curves import A2A_NIC_EFFICIENCY

    text = (ROOT / "calibration" / "public" / "alltoall-efficiency.csv").read_text()
    rows = list(csv.DictReader(ln for ln in text.splitlines() if not ln.startswith("#")))
    used = [float(r["per_nic_gbs"]) / float(r["line_gbs"]) for r in rows if r["used"] == "yes"]
    assert used and pytest.approx(min(used)) == A2A_NIC_EFFICIENCY
    # Breaking it moves the all-to-all only: the ring collectives keep NIC_EFFICIENCY.
    prof = load_profile("h200-sxm")
    fab = load_topology("h200-roce-railopt", {}).fabric()
    base, broken = CostModel(prof, fab), CostModel(prof, fab)
    broken.book.a2a_eta = 0.5
    broken.book.memo.clear()
    a2a = [m.collective("all_to_all", 2**28, 64).seconds for m in (base, broken)]
    ag = [m.collective("all_gather", 2**28, 64).seconds for m in (base, broken)]
    assert a2a[1] > 1.5 * a2a[0] and ag[0] == ag[1]
