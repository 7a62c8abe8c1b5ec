"""What the harness says about the host: CPU peaks from probes, software versions, names.

A CPU has no datasheet: the profile's peaks are this run's own probes (the best fp32 GEMM rate
and a large copy's bandwidth), every dtype at the fp32 rate (attention runs in fp32 on a CPU),
kernels run on one thread (a thread pool's timings swing with any other load), and the
"interconnect" is one host whose link rate is that copy bandwidth.
"""

from __future__ import annotations

import platform
from collections.abc import Callable
from pathlib import Path

from libra_des.calibrate.kernels import Clock
from libra_des.calibrate.sizes import MIB
from libra_des.hardware.profiles.profile import Interconnect, Peaks, Profile, Sample, Sourced


def best_rate(fn: Callable[[], object], work: float, clock: Clock, repeats: int = 5) -> float:
    fn()
    return work / min(clock.seconds(fn) for _ in range(repeats))


def cpu_profile(base: Profile, world: int, gemm: list[Sample]) -> Profile:
    """Peaks and 'interconnect' of a CPU host, from probes (module docstring)."""
    import torch

    clock = Clock(False)
    a = torch.randn(1024, 1024)
    flops = best_rate(lambda: a @ a, 2 * 1024**3, clock)
    measured = [2 * s.gemm.m * s.gemm.n * s.gemm.k / s.time.median for s in gemm if s.gemm]
    flops = max([flops, *measured])
    src = torch.zeros(16 * MIB)  # 16 Mi fp32 = 64 MiB
    dst = torch.empty_like(src)
    copy_bw = best_rate(lambda: dst.copy_(src), 2 * src.numel() * 4, clock)
    why = "measured by the harness on this CPU (no datasheet): best fp32 GEMM rate"
    rate = Sourced(value=float(f"{flops:.6g}"), source=f"{why}; every dtype runs at it here")
    copy = Sourced(
        value=float(f"{copy_bw:.6g}"),
        source="measured by the harness: best 64 MiB tensor copy, read + write bytes per second",
    )
    peaks = Peaks(bf16_flops=rate, fp16_flops=rate, fp32_flops=rate, hbm_bytes_per_s=copy)
    link = Interconnect(
        name=f"one host, {world} gloo ranks over loopback TCP (modelled as a non-blocking switch)",
        gpus_per_node=max(world, 1),
        nics_per_node=0,
        intra_bw=copy,
        inter_bw=copy,
        intra_latency=Sourced(value=1e-6, source="assumption: loopback hop; the fit's alpha wins"),
        inter_latency=Sourced(value=1e-6, source="unused: a single host"),
    )
    return base.model_copy(update={"peaks": peaks, "interconnect": link})


def software(cuda: bool, flash: bool) -> dict[str, str]:
    import torch

    out = {"torch": torch.__version__, "python": platform.python_version()}
    if cuda:
        out["cuda"] = str(torch.version.cuda)
        out["nccl"] = ".".join(str(x) for x in torch.cuda.nccl.version())
        if flash:
            import flash_attn  # type: ignore[import-not-found,unused-ignore]

            out["flash_attn"] = str(flash_attn.__version__)
    else:
        out["distributed"] = "gloo"
    return out


def device_name(cuda: bool) -> str:
    if cuda:
        import torch

        return str(torch.cuda.get_device_name(0))
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return f"CPU {line.split(':', 1)[1].strip()}"
    return f"CPU {platform.processor() or platform.machine()}"
