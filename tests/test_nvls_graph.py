"""NVLS bandwidth from NCCL's NVLS graph, stated by hand (NVIDIA/nccl ``src/graph/search.cc``
ncclTopoCompute / ncclTopoSearchTryNvls, ``tuning.cc`` ncclTopoTuneModel).

NCCL's rule on one NVSwitch node of ``n`` Hopper GPUs: the NVLS graph has ``n`` channels (one
head GPU each); channel g moves ``2 s`` over its head's NVLink and ``s`` over every other
GPU's, so a GPU's NVLink carries ``(n + 1) s``. A GPU's NVLink is credited 18 x 20.6 = 370.8
GB/s (topo.h), and ``s`` is the fastest SM90 intra speed (60, 50, 40, ... GB/s) that fits.
The tuner then takes ``s x 0.85 (nvlsEfficiency) x (n - 1) / n x 2`` per channel for
all_reduce (two halves pipelined), times ``n`` channels, times ``n / (2 (n - 1))`` to an
algorithm bandwidth.
"""

from __future__ import annotations

import pytest

from libra_des.hardware.costs import CostModel
from libra_des.hardware.fabric.topology import load_topology
from libra_des.hardware.profiles.profile import load_profile

# (GPUs, search speed s by hand: the largest of 60, 50, 40 with (n + 1) s <= 370.8)
HAND = ((2, 60.0), (4, 60.0), (8, 40.0))


def model() -> CostModel:
    prof = load_profile("h200-sxm").model_copy(update={"fits": (), "samples": ()})
    return CostModel(prof, load_topology("h200-8x-nvswitch", {}).fabric())


@pytest.mark.parametrize(("n", "speed"), HAND)
def test_nvls_all_reduce_bandwidth_is_nccls_rule(n: int, speed: float) -> None:
    bus = n * speed * 0.85 * (n - 1) / n * 2.0
    algbw = bus * n / (2 * (n - 1))
    (nvls,) = [e for e in model().tuner.table("all_reduce", n, n) if e.algorithm == "nvls"]
    assert nvls.channels == n
    assert nvls.bandwidth_gbs == pytest.approx(algbw)


def test_by_hand_values() -> None:
    """The rule's numbers written out: 102, 204 and 272 GB/s of algorithm bandwidth."""
    got = {n: e.bandwidth_gbs for n, _ in HAND for e in model().tuner.table("all_reduce", n, n)
           if e.algorithm == "nvls"}
    assert got == pytest.approx({2: 102.0, 4: 204.0, 8: 272.0})


def test_nccl_picks_ring_below_8_gpus_and_nvls_at_8() -> None:
    """Ring Simple on 12 channels x 30 GB/s (bus 360 GB/s: algbw 360 at 2 GPUs, 240 at 4)
    beats NVLS's 102 and 204; at 8 ring's 205.7 loses to NVLS's 272."""
    m = model()
    assert [m.collective("all_reduce", 2**30, n).algorithm for n in (2, 4, 8)] == [
        "ring", "ring", "nvls"]
