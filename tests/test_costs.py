"""Cost models: closed forms, physical plausibility, kernels, and the ``cost`` command."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from libra_des.cli import main
from libra_des.errors import InputError
from libra_des.hardware.costs import CostModel
from libra_des.hardware.fabric.rates import Fabric
from libra_des.hardware.profiles.profile import COLLECTIVE_OPS, load_profile

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def hgx(nodes: int = 4, inter_bw: float = 50e9, nics: int = 8) -> Fabric:
    """An HGX-like fabric built by hand (450 GB/s NVLink, 400 Gb/s NICs)."""
    return Fabric(
        gpus_per_node=8,
        nodes=nodes,
        intra_kind="nvswitch",
        intra_bw=450e9,
        intra_latency=1e-6,
        inter_bw=inter_bw,
        inter_latency=5e-6,
        nics_per_node=nics,
        nvls=True,
    )


@pytest.fixture(scope="module")
def h200() -> CostModel:
    return CostModel(load_profile(None), hgx())


@pytest.fixture(scope="module")
def a100() -> CostModel:
    prof = load_profile("a100-sxm")
    return CostModel(prof, prof.interconnect.fabric(nodes=4))


# ----------------------------------------------------------------------------- closed forms


@pytest.mark.parametrize("n", [2, 3, 4, 8])
@pytest.mark.parametrize("size", [1.0, 8388608.0, 3.3e9])
def test_ring_all_reduce_closed_form(n: int, size: float) -> None:
    fab = hgx()
    model = CostModel(load_profile(None), fab, efficiency=False)
    got = model.collective("all_reduce", size, n, algorithm="ring").seconds
    want = 2 * (n - 1) * fab.intra_latency + 2 * (n - 1) / n * size / fab.intra_bw
    assert got == pytest.approx(want, rel=1e-9)


def test_profile_without_fits_is_the_datasheet_closed_form() -> None:
    """Without efficiencies: the alpha-beta closed form; with them and no fits: NCCL's
    tuning model of the ring (Simple at 100 MB: base 8.4 us + 3 hops x 3.4 us, the ring's
    12 x 30 GB/s channels converted by ranks / steps = 4 / 3)."""
    prof = load_profile(None).model_copy(update={"fits": ()})
    fab = hgx()
    plain = CostModel(prof, fab, efficiency=False).collective("all_gather", 1e8, 4,
                                                              algorithm="ring").seconds
    assert plain == pytest.approx(3 * fab.intra_latency + 3 / 4 * 1e8 / fab.intra_bw, rel=1e-9)
    res = CostModel(prof, fab).collective("all_gather", 1e8, 4, algorithm="ring")
    assert (res.protocol, res.tier) == ("Simple", "datasheet")
    want = (8.4 + 3 * 3.4) * 1e-6 + 1e8 / (360e9 * 4 / 3)
    assert res.seconds == pytest.approx(want, rel=1e-9)


def test_inter_node_phase_uses_the_nic_bandwidth() -> None:
    """Hierarchical all_reduce on 2 nodes x 8: only the inter phase sees the NICs."""
    size, g = 2.0**30, 8
    times = {}
    for bw in (50e9, 25e9):
        model = CostModel(load_profile(None), hgx(inter_bw=bw), efficiency=False)
        times[bw] = model.collective("all_reduce", size, 16, g, "hierarchical").seconds
    # Inter phase: ring all_reduce of S/g over 2 nodes on each rail at one NIC per rank.
    per_rank = lambda bw: 2 * (2 - 1) / 2 * (size / g) / bw  # noqa: E731
    assert times[25e9] - times[50e9] == pytest.approx(per_rank(25e9) - per_rank(50e9), rel=1e-9)


def test_multi_node_ring_is_bounded_by_the_node_nics() -> None:
    model = CostModel(load_profile(None), hgx(nics=2), efficiency=False)
    res = model.collective("all_gather", 2.0**32, 16, 8, "ring")
    # Two NICs of 50 GB/s per node carry every channel's boundary crossing.
    assert res.seconds == pytest.approx(15 * 5e-6 + 15 / 16 * 2.0**32 / 100e9, rel=1e-9)


def test_all_to_all_crossing_nodes_is_nic_bound(h200: CostModel) -> None:
    size, n, g = 2.0**32, 16, 8
    secs = h200.collective("all_to_all", size, n, g).seconds
    inter = (n - g) / n * size / 50e9
    assert inter <= secs <= inter * 1.05


# ----------------------------------------------------------------------------- plausibility

LAYOUTS = [(2, 2), (4, 4), (8, 8), (6, 8), (16, 8), (32, 8), (16, 4), (2, 1)]


CASES = st.tuples(
    st.sampled_from(["h200", "a100"]), st.sampled_from(COLLECTIVE_OPS), st.sampled_from(LAYOUTS)
)


def pick(
    models: dict[str, CostModel], case: tuple[str, str, tuple[int, int]]
) -> tuple[CostModel, str, int, int]:
    """(model, op, group, GPUs per node) of a drawn case; send_recv is always 2 GPUs."""
    which, op, (n, g) = case
    n = 2 if op == "send_recv" else n
    return models[which], op, n, min(g, n)


@settings(max_examples=60, deadline=None)
@given(case=CASES, small=st.floats(1.0, 1e10), factor=st.floats(1.0, 1e3))
def test_time_never_falls_as_bytes_grow(
    h200: CostModel,
    a100: CostModel,
    case: tuple[str, str, tuple[int, int]],
    small: float,
    factor: float,
) -> None:
    model, op, n, g = pick({"h200": h200, "a100": a100}, case)
    a = model.collective(op, small, n, g)
    b = model.collective(op, small * factor, n, g)
    assert b.seconds >= a.seconds * (1 - 1e-12)


@settings(max_examples=60, deadline=None)
@given(case=CASES, size=st.floats(1e3, 1e11))
def test_bus_bandwidth_never_exceeds_the_link(
    h200: CostModel, a100: CostModel, case: tuple[str, str, tuple[int, int]], size: float
) -> None:
    model, op, n, g = pick({"h200": h200, "a100": a100}, case)
    fab = model.fabric
    link = fab.intra_bw if n <= g else min(fab.intra_bw, min(g, fab.nics_per_node) * fab.inter_bw)
    for alg in model.algorithms(op, n, g):
        res = model.collective(op, size, n, g, alg)
        if alg == "nvls":
            # In-switch reduction: each rank's link moves S (not 2(n-1)/n S) per direction.
            assert size / res.seconds <= fab.intra_bw * (1 + 1e-9)
        else:
            assert res.busbw_gbs * 1e9 <= link * (1 + 1e-9)


def test_measured_group_is_reproduced_and_unmeasured_group_is_between(h200: CostModel) -> None:
    path = DATA / "nccl-tests-h200x8" / "all_gather-8gpu.perf.txt"
    if not path.exists():
        pytest.skip("../shared/data/nccl-tests-h200x8 is absent")
    row = next(
        line.split() for line in path.read_text().splitlines() if line.startswith("  1073741824")
    )
    measured = float(row[5]) * 1e-6
    got = h200.collective("all_gather", 2.0**30, 8)
    assert got.algorithm == "ring"
    assert got.seconds == pytest.approx(measured, rel=0.03)
    bw = [h200.collective("all_gather", 2.0**30, n).busbw_gbs for n in (2, 4, 8)]
    assert min(bw[0], bw[2]) * 0.8 <= bw[1] <= max(bw[0], bw[2]) * 1.2


def pcie_box(switches: int = 1) -> Fabric:
    """8 PCIe Gen4 GPUs (32 GB/s each) over ``switches`` switches under one host bridge."""
    return Fabric(
        gpus_per_node=8,
        nodes=1,
        intra_kind="pcie",
        intra_bw=32e9,
        intra_latency=1e-6,
        inter_bw=25e9,
        inter_latency=7e-6,
        nics_per_node=1,
        pcie_bridge_bw=32e9,
        pcie_switches=switches,
    )


def test_intra_fits_do_not_apply_to_a_pcie_node() -> None:
    model = CostModel(load_profile(None), pcie_box())
    res = model.collective("all_reduce", 1e9, 8, algorithm="ring")
    assert res.tier == "datasheet"  # the H200 NVSwitch fits are not used
    # NCCL's ring on PCIe: 30 GB/s of search speed fits once in 32 GB/s, doubled at half
    # speed; Simple: base 8.4 us + 14 hops x 5.7 us; bus bandwidth x 8 / 14.
    want = (8.4 + 14 * 5.7) * 1e-6 + 1e9 / (30e9 * 8 / 14)
    assert res.seconds == pytest.approx(want, rel=1e-9)


def test_pcie_bridge_limits_cross_switch_all_to_all() -> None:
    fabric = pcie_box
    one = CostModel(load_profile(None), fabric(1)).collective("all_to_all", 1e9, 8).seconds
    two = CostModel(load_profile(None), fabric(2)).collective("all_to_all", 1e9, 8).seconds
    # 4 ranks per switch each send 4/8 of their bytes across: 2 GB on one 32 GB/s uplink.
    assert two == pytest.approx(1e-6 + 4 * 4 * (1e9 / 8) / 32e9, rel=1e-6)
    assert two > one


# ----------------------------------------------------------------------------- all-to-all(v), p2p


def test_all_to_allv_heavy_rank_is_slower(h200: CostModel) -> None:
    heavy = np.full((8, 8), 1e7)
    heavy[0] *= 8
    balanced = np.full((8, 8), heavy.sum() / 64)
    assert h200.all_to_allv(heavy) > 2 * h200.all_to_allv(balanced)


def test_all_to_allv_uniform_matches_all_to_all(h200: CostModel) -> None:
    for n, g in ((8, 8), (16, 8), (24, 8)):
        size = 3e8
        matrix = np.full((n, n), size / n)
        assert h200.all_to_allv(matrix, g) == pytest.approx(
            h200.collective("all_to_all", size, n, g).seconds, rel=1e-12
        )
    assert h200.all_to_allv(np.diag(np.full(4, 1e9))) == 0.0
    with pytest.raises(InputError):
        h200.all_to_allv(np.ones((3, 4)))


def test_p2p_same_node_is_faster_and_measured_rate_wins(a100: CostModel) -> None:
    size = 64 * 2.0**20
    intra, inter = a100.p2p(size, True), a100.p2p(size, False)
    assert intra < inter
    # Vidur's A100 cluster moved about 7.8 GB/s between nodes, not HDR's 25 GB/s.
    assert 6e9 < size / inter < 9e9
    assert a100.p2p(0, False) == 0.0


# ----------------------------------------------------------------------------- kernels


def test_attention_efficiency_falls_steeply_for_short_documents(h200: CostModel) -> None:
    def tflops(length: int, heads: int = 64) -> float:
        docs = [length] * (32768 // length)
        secs = h200.attention_docs(docs, heads, 4, 128)
        pairs = sum(n * (n + 1) / 2 for n in docs)
        return 4 * 128 * heads * pairs / secs / 1e12

    assert tflops(128) < 0.25 * tflops(8192)
    assert tflops(512) < 0.75 * tflops(8192)
    ratio = tflops(8192, 64) / tflops(8192, 8)
    assert 1.0 < ratio < 1.3  # fewer heads: mildly slower per FLOP


def test_attention_vectorised_matches_whole_documents(h200: CostModel) -> None:
    lengths = np.array([256, 1024, 4096, 16384])
    pairs = lengths * (lengths + 1) / 2
    vec = h200.attention(pairs, lengths, 32, 4, 128)
    one = [h200.attention_docs([n], 32, 4, 128) for n in lengths]
    np.testing.assert_allclose(vec, one, rtol=1e-12)
    assert h200.attention(np.array([0.0]), np.array([10.0]), 8, 1, 128)[0] == 0.0
    heads = np.array([8, 16, 32])
    assert h200.attention(1e8, 4096, heads, 4, 128).shape == (3,)


def test_attention_backward_costs_about_two_and_a_half_forwards(h200: CostModel) -> None:
    fwd = h200.attention_docs([32768], 64, 8, 128)
    bwd = h200.attention_docs([32768], 64, 8, 128, backward=True)
    assert 2.5 < bwd / fwd < 2.5 / 0.86 * 1.01


def test_attention_cp_shard_has_a_cp_th_of_the_pairs(h200: CostModel) -> None:
    full = h200.attention_docs([32768], 64, 8, 128)
    shard = h200.attention_docs([32768], 64, 8, 128, cp=8)
    assert 6.5 < full / shard < 8.5


def test_gemm_roofline(h200: CostModel) -> None:
    prof = h200.profile
    big = float(h200.gemm(16384, 16384, 16384))
    eff = 2 * 16384**3 / big / prof.peak_flops("bf16")
    assert 0.6 * prof.kernels.gemm_efficiency.value < eff <= prof.kernels.gemm_efficiency.value
    skinny = float(h200.gemm(1, 8192, 8192))  # reads the whole weight: memory bound
    assert skinny == pytest.approx(
        prof.kernels.launch_s.value + 2 * (8192 + 8192**2 + 8192) / prof.hbm_bw, rel=1e-9
    )
    assert float(h200.gemm(4096, 4096, 4096, "fp32")) > float(h200.gemm(4096, 4096, 4096))
    assert h200.grouped_gemm(np.zeros(4), 1536, 4096) == 0.0


@settings(max_examples=40, deadline=None)
@given(
    m=st.integers(1, 1 << 16),
    grow=st.integers(0, 1 << 16),
    n=st.integers(1, 1 << 14),
    k=st.integers(1, 1 << 14),
)
def test_gemm_time_never_falls_as_m_grows(
    h200: CostModel, m: int, grow: int, n: int, k: int
) -> None:
    times = h200.gemm(np.array([m, m + grow]), n, k)
    assert times[1] >= times[0]


def test_elementwise_is_hbm_bound(h200: CostModel) -> None:
    k = h200.profile.kernels
    secs = h200.elementwise(np.array([0.0, 1e9]))
    assert secs[0] == 0.0
    assert secs[1] == pytest.approx(
        k.launch_s.value + 1e9 / (h200.profile.hbm_bw * k.elementwise_efficiency.value)
    )


# ----------------------------------------------------------------------------- the cost command


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    assert main(["cost", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_cost_command_collective_json(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, "--op", "all_reduce", "--bytes", "8388608", "--group", "4")
    assert set(out) >= {"seconds", "algorithm", "busbw_gbs", "tier"}
    assert out["tier"] in ("measured", "borrowed", "datasheet")
    assert isinstance(out["seconds"], float) and out["seconds"] > 0
    multi = run_json(
        capsys,
        "--op",
        "all_reduce",
        "--bytes",
        "8388608",
        "--group",
        "16",
        "--topology",
        "h200-roce-railopt",
        "--gpus-per-node",
        "4",
    )
    assert multi["seconds"] > out["seconds"]
    pinned = run_json(
        capsys,
        "--op",
        "all_reduce",
        "--bytes",
        "1e9",
        "--group",
        "8",
        "--algorithm",
        "ring",
        "--no-fit",
    )
    assert pinned["seconds"] == pytest.approx(14 * 1e-6 + 2 * 7 / 8 * 1e9 / 450e9, rel=1e-9)


ATTENTION = (
    "--op",
    "attention",
    "--doc-lengths",
    "4096,4096",
    "--heads",
    "64",
    "--kv-heads",
    "4",
    "--head-dim",
    "128",
)


def test_cost_command_attention_and_gemm(capsys: pytest.CaptureFixture[str]) -> None:
    att = run_json(capsys, *ATTENTION)
    bwd = run_json(capsys, *ATTENTION, "--backward")
    assert bwd["seconds"] > 2 * att["seconds"]
    gemm = run_json(capsys, "--op", "gemm", "--m", "4096", "--n", "4096", "--k", "4096")
    assert 0 < gemm["tflops"] < 989
    assert main(["cost", "--op", "gemm", "--m", "64", "--n", "64", "--k", "64"]) == 0
    # A tiny GEMM's rate keeps three digits with its prefix (once "0 TFLOP/s").
    assert re.search(r"\(\d+ GFLOP/s", capsys.readouterr().out)


@pytest.mark.parametrize(
    "argv",
    [
        ["--op", "all_mean", "--bytes", "10", "--group", "2"],
        ["--op", "all_reduce", "--bytes", "-5", "--group", "2"],
        ["--op", "all_reduce", "--bytes", "10", "--group", "8", "--algorithm", "butterfly"],
        ["--op", "all_reduce", "--bytes", "10", "--group", "8", "--gpus-per-node", "9"],
        ["--op", "all_reduce", "--bytes", "10", "--group", "0"],
        ["--op", "all_reduce", "--bytes", "10", "--group", "4", "--profile", "no-such"],
        ["--op", "all_reduce", "--bytes", "10", "--group", "4", "--topology", "no-such"],
        ["--op", "attention", "--doc-lengths", "4096,x", "--heads", "8"],
        ["--op", "attention", "--doc-lengths", "4096", "--heads", "0"],
        ["--op", "attention", "--doc-lengths", "4096", "--heads", "8", "--cp", "0"],
        ["--op", "gemm", "--m", "8", "--n", "8", "--k", "8", "--dtype", "int3"],
        ["--op", "gemm", "--m", "8", "--n", "0", "--k", "8"],
    ],
)
def test_cost_command_bad_input_is_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    assert main(["cost", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1


def test_cost_command_bad_profile_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert (
        main(["cost", "--profile", str(bad), "--op", "all_reduce", "--bytes", "1", "--group", "2"])
        == 2
    )
    err = capsys.readouterr().err
    assert "well-formed JSON" in err and err.count("\n") == 1
