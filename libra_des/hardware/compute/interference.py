"""Compute-communication interference: what an overlapped collective takes from a kernel.

A collective that runs beside a compute kernel on the same GPU is not free (docs/model.md,
"Compute-communication interference"; measurements in
``calibration/public/interference.yaml``). The model:

* **SMs.** An NCCL kernel runs one CTA per channel on its own SM for as long as it is in
  flight (NCCL's kernels are persistent per channel; ``sm_per_channel`` CTAs each). A
  collective of ``c`` channels takes ``s = c * sm_per_channel`` of the device's ``S`` SMs
  (at most ``S - 1``). A copy-engine transfer takes none (``sm_per_channel = 0``).
* **SM-bound kernels** (GEMM, FlashAttention at training sizes) run on the ``S - s`` SMs that
  are left: a kernel of many waves slows by ``S / (S - s)``; one of ``T`` tiles by the wave
  count, ``ceil(T / (S - s)) / ceil(T / S)`` (:func:`wave_slowdown`: the tail effect).
* **HBM.** A kernel alone uses a share ``u`` of HBM bandwidth, the collective ``h`` (its
  link rate times the HBM bytes it moves per byte on the wire: 2 for a copy, read at the
  sender and write at the receiver; 3 for a reduction step, two reads and a write; divided
  by the HBM bandwidth). Demand beyond the bandwidth is shared in proportion: when
  ``D = u + h > 1`` both run their memory traffic ``D`` times slower.
* **Roofline.** A kernel whose SM-bound share is ``v`` (``v = 1`` for compute-bound, the
  share ``t_flops / t`` otherwise) and HBM share ``u`` slows by
  ``max(v * S / (S - s), u * max(1, D), 1)``; the collective slows by ``max(1, D)``.
  Compute holding SMs does not slow a collective already in flight (its CTAs are resident;
  our assumption, the launch wait of one GEMM wave is ignored).
* **NVLink shared by both.** Copy-engine and SM transfers go over the same NVLink ports: a
  copy-engine transfer saves SMs, never link time (both are priced by the same link model).

Over an overlap of ``w`` seconds of wall time, a kernel slowed by ``a`` loses ``w (1 - 1/a)``
seconds of work (:func:`stretched_chunk`). ``interference: off`` skips all of it (the
simulator's earlier free overlap, bit for bit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from libra_des.errors import InputError
from libra_des.hardware.compute.kernels import sm_count

if TYPE_CHECKING:
    from libra_des.hardware.costs import CostModel

#: CTAs NCCL runs per channel (one block per channel per collective: NCCL's ``nChannels``
#: is its grid size; NCCL developer guide, "channels" and ``NCCL_MIN/MAX_NCHANNELS``).
SM_PER_CHANNEL = 1
#: Channels of an overlapped transfer when neither the scenario nor NCCL's tuner says:
#: DeepEP's README example gives its normal dispatch/combine kernels 24 SMs; NCCL's
#: communicator on an 8-GPU H100/H200 NVSwitch node sets up 16 to 32 channels
#: (``hardware/collectives/nccl_tuner.py``). Our default: 16, the low end of NCCL's range.
DEFAULT_CHANNELS = 16
#: HBM share a compute-bound GEMM or FlashAttention kernel uses alone (our assumption: at
#: the simulator's sizes they reach 60-75% of peak FLOP/s with operands reused from L2 and
#: shared memory; Nsight figures for such kernels show DRAM throughput well below half).
KERNEL_HBM_SHARE = 0.15
#: HBM bytes moved per byte on the wire: a copy reads at the sender and writes at the
#: receiver; a reduction step reads two operands and writes one (NCCL's ring primitives).
HBM_PER_WIRE_BYTE = {"copy": 2.0, "reduce": 3.0}


@dataclass(frozen=True)
class OverlapModel:
    """One device's interference model (module docstring).

    ``sms``: the device's SMs; ``sm_per_channel``: CTAs per NCCL channel (0: copy engine);
    ``channels``: the scenario's channel count for every overlapped transfer (None: each
    overlap point's default, NCCL's tuner where it prices the call); ``hbm_bw``: bytes/s;
    ``taken_share``: a calibrated share of SMs a collective takes (from a profile's
    kernel-under-collective cases, :func:`fitted_share`), used instead of
    ``channels * sm_per_channel / sms`` when the scenario sets neither knob.
    """

    sms: int
    sm_per_channel: int = SM_PER_CHANNEL
    channels: int | None = None
    hbm_bw: float = 4.8e12
    kernel_hbm_share: float = KERNEL_HBM_SHARE
    taken_share: float | None = None

    def __post_init__(self) -> None:
        check_counts(self.sm_per_channel, self.channels)
        if self.sms < 2:
            raise InputError("sms", self.sms, "a device with at least 2 SMs")

    def sms_taken(self, channels: int | None = None) -> float:
        """SMs an overlapped collective holds (``channels``: its default when the scenario
        does not set ``comm.channels``)."""
        if self.taken_share is not None and self.channels is None:
            return min(self.taken_share * self.sms, self.sms - 1.0)
        c = self.channels if self.channels is not None else (channels or DEFAULT_CHANNELS)
        return float(min(c * self.sm_per_channel, self.sms - 1))

    def sm_factor(self, channels: int | None = None) -> float:
        """``S / (S - s)``: an SM-bound kernel of many waves beside the collective."""
        return self.sms / (self.sms - self.sms_taken(channels))

    def comm_hbm_share(self, wire_bytes_per_s: float, kind: str = "copy") -> float:
        """HBM share a transfer at ``wire_bytes_per_s`` uses (module docstring)."""
        return HBM_PER_WIRE_BYTE[kind] * max(wire_bytes_per_s, 0.0) / self.hbm_bw

    def factors(self, channels: int | None = None, comm_hbm: float = 0.0,
                sm_bound: float = 1.0, kernel_hbm: float | None = None) -> tuple[float, float]:
        """(kernel slowdown, collective slowdown) while both run (module docstring)."""
        u = self.kernel_hbm_share if kernel_hbm is None else kernel_hbm
        demand = max(1.0, u + comm_hbm)
        kernel = max(sm_bound * self.sm_factor(channels), u * demand, 1.0)
        return kernel, demand


def check_counts(sm_per_channel: int | None, channels: int | None) -> None:
    """Bad input before any work: negative SMs per channel, fewer than one channel."""
    if sm_per_channel is not None and sm_per_channel < 0:
        raise InputError("comm.sm_per_channel", sm_per_channel, "an integer >= 0")
    if channels is not None and channels < 1:
        raise InputError("comm.channels", channels, "an integer >= 1")


def wave_slowdown(tiles: int, sms: int, taken: int) -> float:
    """Slowdown of a kernel of ``tiles`` equal CTAs when ``taken`` of ``sms`` SMs are held:
    ``ceil(T / (S - s)) / ceil(T / S)`` (one CTA per SM, the tail effect)."""
    if tiles < 1 or sms < 2 or not 0 <= taken < sms:
        raise InputError("tiles", tiles, "tiles >= 1 and 0 <= taken < sms")
    return math.ceil(tiles / (sms - taken)) / math.ceil(tiles / sms)


def stretched_chunk(c: np.ndarray, overlap: np.ndarray, kernel: float,
                    comm: float) -> tuple[np.ndarray, np.ndarray]:
    """A compute chunk ``c`` beside ``overlap`` seconds of transfers (both as alone).

    The two run together for ``w = min(c * kernel, overlap * comm)`` of wall time; in it the
    kernel does ``w / kernel`` of its work, so it ends ``w (1 - 1/kernel)`` later, and the
    transfers inside the window take ``comm`` times longer. Returns (compute seconds added,
    transfer seconds added), each shaped as ``c`` and ``overlap`` broadcast
    (:func:`~libra_des.hardware.compute.interference_kernel.stretch` per element).
    """
    from libra_des.hardware.compute.interference_kernel import stretched  # numba only where it runs

    a, b = np.broadcast_arrays(np.asarray(c, dtype=np.float64),
                               np.asarray(overlap, dtype=np.float64))
    added, extra = stretched(a.ravel(), b.ravel(), float(kernel), float(comm))
    return added.reshape(a.shape), extra.reshape(a.shape)


def fitted_share(slowdowns: list[float]) -> float | None:
    """SM share a collective takes, from measured kernel slowdowns ``k``: a many-wave GEMM
    slowed by ``k = S / (S - s)`` lost ``s / S = 1 - 1/k`` (median; None without cases)."""
    good = sorted(1.0 - 1.0 / k for k in slowdowns if math.isfinite(k) and k >= 1.0)
    if not good:
        return None
    mid = len(good) // 2
    return good[mid] if len(good) % 2 else 0.5 * (good[mid - 1] + good[mid])


def overlap_model(cost: CostModel, sm_per_channel: int | None,
                  channels: int | None) -> OverlapModel:
    """The device's model: its SMs and HBM, the scenario's knobs, and a calibrated SM share
    when the profile holds GPU kernel-under-collective cases and the scenario sets no knob."""
    prof = cost.profile
    cases = [c.kernel_slowdown for c in prof.interference]
    on_gpu = (prof.gpu or prof.device).upper() != "CPU"
    share = fitted_share(cases) if on_gpu and sm_per_channel is None else None
    return OverlapModel(sms=sm_count(prof.device),
                        sm_per_channel=1 if sm_per_channel is None else sm_per_channel,
                        channels=channels, hbm_bw=prof.hbm_bw, taken_share=share)


def p2p_channels(cost: CostModel, workers: int) -> int:
    """Channels (SMs) NCCL's point-to-point runs on for a group of ``workers``: the
    communicator's execution channels (twice the search's) rounded up to a power of two
    (:meth:`~libra_des.hardware.collectives.nccl_tuner.NcclTuner.p2p_channels`;
    :data:`DEFAULT_CHANNELS` without the tuner)."""
    tuner = cost.tuner
    if tuner is None or workers < 2:
        return DEFAULT_CHANNELS
    gpn = max(1, min(cost.fabric.gpus_per_node, workers))
    return tuner.p2p_channels(-(-workers // gpn), gpn)


def port_share(model: OverlapModel, cost: CostModel) -> float:
    """HBM share of a transfer at the GPU's NVLink port rate (an upper bound on any one)."""
    return model.comm_hbm_share(cost.fabric.intra_bw)
