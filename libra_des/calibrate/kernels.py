"""Time kernels on one device with torch (imported inside the functions that use it).

Method (assumptions):

- Every case runs a few warm-up calls first (allocations, cuDNN/cuBLAS heuristics), then a
  number of timed repeats sized to a per-case time budget. On a GPU a repeat is timed with
  CUDA events after a device synchronisation; on a CPU with ``time.perf_counter``. A sample
  stores median, mean, min, max and std over the repeats; the fits use the median.
- attention: varlen causal forward. Documents of equal length are one batched
  ``scaled_dot_product_attention`` call (``is_causal=True`` inside each document), so a call
  over a length mix is one launch per distinct length; ``flash_attn_varlen_func`` (one launch)
  is used instead when ``flash-attn`` is importable on a GPU. Recorded as
  :class:`~libra_des.hardware.profiles.profile.AttentionShape` (length, count) runs, as the
  importers
  record the public H100 table, so the same fitter applies.
- gemm: ``[m, k] x [k, n]`` (bf16 on GPU, fp32 on CPU). grouped_gemm: ``E`` experts with
  ``m`` rows each, timed as one batched GEMM launch (``torch.bmm``), i.e. a grouped GEMM under
  even routing; the sample keeps the per-expert shape in ``gemm`` and ``E`` in ``group``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from libra_des.calibrate.sizes import CLOCK_FLOOR_S, SOURCE, Sizes
from libra_des.hardware.profiles.profile import AttentionShape, GemmShape, Sample, TimeStats

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Clock:
    """Times one repeat: CUDA events on a GPU (device time), perf_counter on a CPU."""

    cuda: bool

    def sync(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize()

    def seconds(self, fn: Callable[[], object], setup: Callable[[], object] | None = None
                ) -> float:
        """Seconds of ``fn``; ``setup`` (if any) runs after the synchronisation and before the
        clock starts, so work it launches (an async collective) is still in flight."""
        self.sync()
        if setup is not None:
            setup()
        if not self.cuda:
            t0 = time.perf_counter()
            fn()
            return time.perf_counter() - t0
        import torch

        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) * 1e-3


def stats(times: Sequence[float]) -> TimeStats:
    t = np.maximum(np.asarray(times, dtype=np.float64), CLOCK_FLOOR_S)
    return TimeStats(
        median=float(np.median(t)),
        mean=float(t.mean()),
        min=float(t.min()),
        max=float(t.max()),
        std=float(t.std()),
    )


def measure(fn: Callable[[], object], clock: Clock, sizes: Sizes, warmup: int = 3) -> TimeStats:
    """Warm up, size the repeats to the case budget from the warm-up times, time them."""
    warm = [clock.seconds(fn) for _ in range(warmup)]
    repeats = int(np.clip(sizes.budget_s / max(min(warm), 1e-7), 5, sizes.max_repeats))
    return stats([clock.seconds(fn) for _ in range(repeats)])


def dtype_of(device: torch.device) -> torch.dtype:
    import torch

    return torch.bfloat16 if device.type == "cuda" else torch.float32


@dataclass(frozen=True)
class KernelBench:
    """Kernel benchmarks on one device (dtype bf16 on a GPU, fp32 on a CPU)."""

    device: torch.device
    sizes: Sizes
    rng: np.random.Generator

    @property
    def clock(self) -> Clock:
        return Clock(self.device.type == "cuda")

    @property
    def dtype_name(self) -> str:
        return "bf16" if self.device.type == "cuda" else "fp32"

    def tensor(self, *shape: int) -> torch.Tensor:
        # Values only need to be finite and non-degenerate; torch's own generator is seeded
        # from the harness's numpy generator so reruns draw the same tensors.
        import torch

        gen = torch.Generator(device=self.device).manual_seed(int(self.rng.integers(2**31)))
        return torch.randn(*shape, device=self.device, dtype=dtype_of(self.device),
                           generator=gen)

    # -- attention
    def mixes(self) -> list[tuple[tuple[int, int], ...]]:
        """Uniform mixes, one long document among short ones, and two long-tailed draws."""
        total, s = self.sizes.attn_tokens, self.sizes
        out: list[tuple[tuple[int, int], ...]]
        out = [((length, total // length),) for length in s.attn_lengths]
        short = min(s.attn_lengths)
        out.append(tuple(sorted({(total // 2, 1), (short, total // 2 // short)})))
        out += [tailed_mix(total, short, self.rng) for _ in range(2)]
        return list(dict.fromkeys(out))  # two draws may coincide on tiny sizes

    def attention(self, flash: Callable[..., torch.Tensor] | None) -> list[Sample]:
        samples = []
        with self.fast_sdpa():
            for docs in self.mixes():
                for heads in self.sizes.attn_heads:
                    shape = AttentionShape(
                        docs=docs,
                        heads_q=heads,
                        heads_kv=max(1, heads // 8),
                        head_dim=self.sizes.head_dim,
                    )
                    call, how, shape = self.attention_call(shape, flash)
                    samples.append(
                        Sample(
                            op="attention",
                            attention=shape,
                            time=measure(call, self.clock, self.sizes),
                            source=f"{SOURCE}: {how} {self.dtype_name} {self.device.type}",
                        )
                    )
        return samples

    def fast_sdpa(self) -> AbstractContextManager[object]:
        """On a GPU, forbid SDPA's unfused math fallback: a case no fused kernel takes fails
        loudly instead of timing a different algorithm."""
        if self.device.type != "cuda":
            return nullcontext()
        from torch.nn.attention import SDPBackend, sdpa_kernel

        fused = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]
        return sdpa_kernel([*fused, SDPBackend.CUDNN_ATTENTION])

    def attention_call(
        self, a: AttentionShape, flash: Callable[..., torch.Tensor] | None
    ) -> tuple[Callable[[], object], str, AttentionShape]:
        """The timed call, its name, and the shape it really runs: if no fused kernel takes
        grouped K/V heads, K/V are expanded to one head per query head (same FLOPs; the
        sample then says ``heads_kv = heads_q``)."""
        import torch

        d, hq, hkv = a.head_dim, a.heads_q, a.heads_kv
        if flash is not None:
            lengths = np.repeat([x[0] for x in a.docs], [x[1] for x in a.docs])
            tokens = int(lengths.sum())
            cu = torch.tensor(np.concatenate([[0], np.cumsum(lengths)]), dtype=torch.int32)
            cu = cu.to(self.device)
            q, k, v = (self.tensor(tokens, h, d) for h in (hq, hkv, hkv))
            top = int(lengths.max())
            varlen = partial(flash, q, k, v, cu, cu, top, top, causal=True)
            return varlen, "flash_attn_varlen", a
        sdpa = torch.nn.functional.scaled_dot_product_attention
        for kv_heads in (hkv, hq):
            runs = [
                (self.tensor(count, hq, length, d), self.tensor(count, kv_heads, length, d))
                for length, count in a.docs
            ]

            def call(runs: list[tuple[torch.Tensor, torch.Tensor]] = runs) -> None:
                for q, kv in runs:
                    sdpa(q, kv, kv, is_causal=True, enable_gqa=kv.shape[1] != q.shape[1])

            try:
                call()
            except RuntimeError:
                if kv_heads == hq:
                    raise
                continue
            return call, "torch sdpa", a.model_copy(update={"heads_kv": kv_heads})
        raise AssertionError("unreachable: the expanded K/V call either ran or raised")

    # -- GEMMs
    def gemm(self) -> list[Sample]:
        import torch

        samples = []
        for n, k in self.sizes.gemm_nk:
            for m in self.sizes.gemm_m:
                a, b = self.tensor(m, k), self.tensor(k, n)
                c = torch.empty(m, n, device=self.device, dtype=dtype_of(self.device))
                samples.append(
                    Sample(
                        op="gemm",
                        gemm=GemmShape(m=m, n=n, k=k, dtype=self.dtype_name),
                        time=measure(partial(torch.mm, a, b, out=c), self.clock, self.sizes),
                        source=f"{SOURCE}: torch.mm {self.device.type}",
                    )
                )
        return samples

    def grouped_gemm(self) -> list[Sample]:
        import torch

        samples = []
        for n, k in self.sizes.expert_nk:
            for experts in self.sizes.experts:
                for m in self.sizes.expert_m:
                    a, b = self.tensor(experts, m, k), self.tensor(experts, k, n)
                    c = torch.empty(experts, m, n, device=self.device,
                                    dtype=dtype_of(self.device))
                    samples.append(
                        Sample(
                            op="grouped_gemm",
                            gemm=GemmShape(m=m, n=n, k=k, dtype=self.dtype_name),
                            group=experts,
                            time=measure(partial(torch.bmm, a, b, out=c), self.clock, self.sizes),
                            source=f"{SOURCE}: torch.bmm, even routing, {self.device.type}",
                        )
                    )
        return samples


def tailed_mix(total: int, floor: int, rng: np.random.Generator) -> tuple[tuple[int, int], ...]:
    """Long-tailed document lengths summing to ``total``: log-normal around 4x ``floor``
    (sigma 1.2), rounded to powers of two so a call has few distinct lengths; the last
    document takes the remainder."""
    draws = rng.lognormal(math.log(4 * floor), 1.2, size=max(8, 4 * total // floor))
    lengths = np.clip(2.0 ** np.round(np.log2(draws)), floor, total).astype(np.int64)
    ends = np.cumsum(lengths)
    keep = lengths[ends < total]
    lengths = np.append(keep, total - int(keep.sum()))
    values, counts = np.unique(lengths, return_counts=True)
    return tuple((int(v), int(c)) for v, c in zip(values, counts, strict=True))


def flash_varlen(device: torch.device) -> Callable[..., torch.Tensor] | None:
    if device.type != "cuda":
        return None
    try:
        from flash_attn import flash_attn_varlen_func  # type: ignore[import-not-found]
    except ImportError:
        return None
    return flash_attn_varlen_func  # type: ignore[no-any-return,unused-ignore]
