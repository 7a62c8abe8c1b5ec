"""Compute-communication interference (``hardware/compute/interference.py``,
``overlap.interference``).

Closed forms: an SM-bound GEMM beside a collective that holds ``s`` of ``S`` SMs for its whole
duration slows by ``S / (S - s)``; a kernel of ``T`` one-wave tiles by the wave count. At the
overlap points, ``off`` (and ``on`` with no SM or HBM taken) is the free overlap bit for bit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from libra_des.cli import main
from libra_des.config import load_scenario
from libra_des.errors import InputError
from libra_des.hardware.compute.interference import (
    OverlapModel,
    check_counts,
    fitted_share,
    overlap_model,
    stretched_chunk,
    wave_slowdown,
)
from libra_des.hardware.costs import CostModel
from libra_des.hardware.fabric.topology import load_topology
from libra_des.hardware.profiles.profile import load_profile
from libra_des.kinds.simulation import simulate
from libra_des.sim.training.overlap import Factors, Ledger, pipeliner_stretch, stretched_buckets

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_scenarios import reduced

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "scenarios" / "quickstart.yaml"
MOE = ROOT / "scenarios" / "moe-glm45.yaml"


def h200_cost() -> CostModel:
    topo = load_topology("h200-roce-railopt", {"nodes": 2})
    return CostModel(load_profile(None), topo.fabric())


def run(path: Path, *extra: str) -> dict:
    result, _ = simulate(load_scenario(path, [*reduced(path), *extra]))
    return json.loads(json.dumps(result))


def test_overlapped_gemm_slows_by_the_sm_share_it_loses() -> None:
    """8192^3 bf16 GEMM on an H200 (132 SMs) beside a 16-channel collective that outlasts it:
    132 / (132 - 16) = 1.1379..., by hand."""
    cost = h200_cost()
    model = overlap_model(cost, None, 16)
    assert model.sms == 132 and model.sms_taken() == 16.0
    kernel, comm = model.factors(comm_hbm=model.comm_hbm_share(cost.fabric.intra_bw))
    assert kernel == pytest.approx(132 / 116, rel=1e-15)
    assert comm == 1.0  # 0.15 + 2 x 450 GB/s / 4.8 TB/s < 1: HBM is not oversubscribed
    t = float(cost.gemm(8192, 8192, 8192))
    added, extra = stretched_chunk(np.array([t]), np.array([10 * t]), kernel, comm)
    assert t + added[0] == pytest.approx(t * 132 / 116, rel=1e-12)
    assert extra[0] == 0.0
    # Beside a shorter transfer only the overlapped part is slowed: w (1 - 1/a) later.
    part, _ = stretched_chunk(np.array([t]), np.array([0.25 * t]), kernel, comm)
    assert part[0] == pytest.approx(0.25 * t * (16 / 132), rel=1e-12)


def test_wave_quantised_gemm_and_the_roofline() -> None:
    # One full wave of 132 tiles with 24 SMs held: a second wave (the measured tail effect).
    assert wave_slowdown(132, 132, 24) == 2.0
    # 50 waves: ceil(6600 / 108) = 62 waves, towards S / (S - s) = 1.222 as waves grow.
    assert wave_slowdown(132 * 50, 132, 24) == 62 / 50
    m = OverlapModel(sms=100, hbm_bw=1e12, kernel_hbm_share=0.9)
    # Memory-bound kernel (v = 0.5, u = 0.9) beside a transfer that takes 30% of HBM:
    # max(0.5 x 100/84, 0.9 x 1.2) = 1.08 for the kernel, 1.2 for the transfer.
    k, c = m.factors(channels=16, comm_hbm=0.3, sm_bound=0.5)
    assert k == pytest.approx(1.08) and c == pytest.approx(1.2)


def test_pipeliner_chunk_closed_form() -> None:
    """c = 1, d = r = 0.25, M = 4: (M-1)/M (d + r) = 0.375 beside each chunk; a = 1.25."""
    c, extra = pipeliner_stretch(np.array([[1.0]]), np.array([[0.25]]), np.array([[0.25]]), 4,
                                 Factors(1.25, 1.0))
    assert c[0, 0] == pytest.approx(0.375 * 0.2) and extra[0, 0] == 0.0
    same, _ = pipeliner_stretch(np.array([[1.0]]), np.array([[0.25]]), np.array([[0.25]]), 1,
                                Factors(1.25, 1.0))
    assert same[0, 0] == 0.0  # one chunk: dispatch before, return after, nothing beside it


def test_buckets_beside_the_backward_delay_later_ones() -> None:
    ledger = Ledger()
    buckets, end = stretched_buckets([1.0, 2.0, 3.0], 0.5, 3.0, Factors(2.0, 1.0), ledger)
    # Free: (1, 1.5), (2, 2.5), (3, 3.5). Buckets 1 and 2 run beside the backward (0.5 s each,
    # half lost at a = 2): bucket 2 waits 0.25 s, bucket 3 0.5 s.
    assert buckets == [(1.0, 1.5), (2.25, 2.75), (3.5, 4.0)] and end == 4.0
    assert ledger.compute_s == pytest.approx(0.5)


def test_on_is_the_default_and_on_without_sms_is_the_free_overlap() -> None:
    off = run(QUICK, "overlap.interference=off")
    assert "interference" not in off and off["scenario"]["overlap"] == {"interference": "off"}
    default = run(QUICK)
    assert run(QUICK, "overlap.interference=on") == default
    assert "overlap" not in default["scenario"] and "interference" in default
    free = run(QUICK, "overlap.interference=on", "comm.sm_per_channel=0")
    assert free["step_time_s"] == off["step_time_s"]
    assert free["interference"]["compute_slowdown_s"] == 0.0


def test_on_slows_by_the_sm_share_and_is_deterministic() -> None:
    """A model that ignored the SMs a collective takes would report no slowdown here."""
    off = run(QUICK, "overlap.interference=off")
    one = run(QUICK, "overlap.interference=on")
    assert one == run(QUICK, "overlap.interference=on")
    two = run(QUICK, "overlap.interference=on", "comm.sm_per_channel=2")
    cost = [r["interference"]["compute_slowdown_s"] for r in (one, two)]
    assert 0 < cost[0] < cost[1]
    # Compute-bound chunks lose w s / S: twice the SMs, (nearly) twice the seconds.
    assert 1.5 < cost[1] / cost[0] <= 2.0 + 1e-9
    assert off["step_time_s"]["mean"] < one["step_time_s"]["mean"] < two["step_time_s"]["mean"]
    points = one["interference"]["by_point_s"]
    assert set(points) == {"pipeliner_exchange", "gradient_sync", "pipeline_handoff"}
    assert sum(points.values()) == pytest.approx(cost[0])


def test_moe_two_stage_windows() -> None:
    off = run(MOE, "overlap.interference=off")
    free = run(MOE, "overlap.interference=on", "comm.sm_per_channel=0")
    assert free["prefill_s"] == off["prefill_s"]
    on = run(MOE, "overlap.interference=on")
    assert on["prefill_s"] > off["prefill_s"] and on["interference"]["compute_slowdown_s"] > 0


def test_calibrated_share_and_yaml_booleans() -> None:
    assert fitted_share([132 / 116, 132 / 116, 5.0]) == pytest.approx(16 / 132)
    assert fitted_share([]) is None
    sc = load_scenario(QUICK, ["overlap.interference=true"])
    assert sc.overlap.interference == "on"


@pytest.mark.parametrize(("knob", "value"), [
    ("overlap.interference", "maybe"), ("comm.sm_per_channel", "-1"), ("comm.channels", "0"),
])
def test_bad_knobs_are_one_line_exit_2(knob: str, value: str, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["run", str(QUICK), "--set", f"{knob}={value}", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {knob}: got"), err
    assert not out.exists()


def test_model_checks_its_counts() -> None:
    with pytest.raises(InputError, match=r"comm\.sm_per_channel"):
        check_counts(-1, None)
    with pytest.raises(InputError, match=r"comm\.channels"):
        OverlapModel(sms=132, channels=0)


def test_a_gpu_profiles_kernel_under_collective_cases_set_the_sm_share() -> None:
    """Cases measured by ``libra-des calibrate`` on a GPU: a GEMM 1.25x slower under the
    collective lost 20% of the SMs; the scenario's own knob wins over the fit."""
    from libra_des.hardware.profiles.profile import Interference

    topo = load_topology("h200-roce-railopt", {"nodes": 1})
    base = load_profile(None)
    case = Interference(m=8192, n=8192, k=8192, collective="all_reduce", nbytes=2**28, group=8,
                        burst=4, kernel_s=1.0, kernel_under_s=1.25, collective_s=2.0, both_s=4.2)
    prof = base.model_copy(update={"interference": (case,)})
    model = overlap_model(CostModel(prof, topo.fabric()), None, None)
    assert model.taken_share == pytest.approx(0.2)
    assert model.sm_factor() == pytest.approx(1.25)
    own = overlap_model(CostModel(prof, topo.fabric()), 1, 8)
    assert own.taken_share is None and own.sms_taken() == 8.0
    cpu = prof.model_copy(update={"gpu": "CPU"})
    assert overlap_model(CostModel(cpu, topo.fabric()), None, None).taken_share is None
