"""The grouped-GEMM kernels MoE systems ship with, each fitted per expert shape on public
measurements.

A kernel is the tile model of :func:`~libra_des.hardware.compute.kernels.grouped_seconds` with its
own tile geometry, and one or more fits (:class:`ShapeFit`), each made on a table measured at one
shape family (hidden x expert intermediate, in the kernel's dtype). A run takes the fit nearest
the model's shape in log2 sizes and says which one, how far it is, and whether the shape lies
outside the box the fits span (``extrapolated``) under ``grouped_fit`` in its result.
``benchmarks/moe_kernel_fit.py`` recomputes every fit's residuals from the data; a test checks
them against the figures stated here:

* ``triton_fused_moe`` (BF16): the Triton fused-MoE kernel (SGLang's default MoE path, shared
  with vLLM). Fits: vLLM PR #44818's H200 table at 2816 x 704 (E 128, top-8; all five constants;
  median 9.3%, max 11.2% over the seven prefill-sized calls, 256-4096 tokens) and vLLM PR
  #24700's H100 Mixtral table at 4096 x 7168 (E 8, top-2, TP 2; efficiency and HBM share;
  median 3.1%, max 5.3% over 256-1536 tokens). The decode-sized calls below 256 tokens are
  outside every fit and outside prefill. The measured calls include the SiLU-and-mul and the
  weighted sum, so the two modelled GEMMs carry them. Tiles: BLOCK_SIZE_M 16 / 64 / 128 and
  BLOCK_SIZE_N 64 (the kernel's default and tuned configurations' range).
* ``cutlass_grouped`` (BF16): CUTLASS SM90 grouped GEMM (``torch._grouped_mm``). Efficiency
  fitted on the three prefill-sized BF16 calls of ``grouped_gemm_h100_bf16_torch.csv`` and
  ``grouped_gemm_h200_bf16_torch.csv`` (-10.8%, -8.5%, +0.4%); the other constants are our
  assumptions (three compute-bound points cannot pin five). Tiles 64 / 128 x 128. No shipped
  system uses it; a registered system may name it.
* ``triton_fused_moe_fp8`` (FP8): the same Triton kernel with FP8 W8A8 per-tensor weights, fitted
  on vLLM PR #24700's H100 table at Qwen3-30B-A3B's own 2048 x 768 (E 128, top-8; efficiency
  and HBM share, shares of the FP8 peak: 11.5% and 56%, the untuned default configuration;
  median 12.0%, max 22.4% over 256-4096 tokens). No shipped system uses it (SGLang's FP8
  path is DeepGEMM); a registered system may name it.
* ``deepgemm_fp8`` (FP8): DeepGEMM's grouped FP8 kernels, fitted on the DeepGEMM README's H800
  table at DeepSeek-V3's 7168 x 2048 (``grouped_gemm_h800_fp8_deepgemm.csv``; in sample median
  2.4%, max 22.4%; leave-one-size-out median 3%). The only kernel that reads that table: BF16
  runs never do (``tests/test_moe_kernels.py``).

Efficiencies are shares of the dtype's own peak and of HBM bandwidth, so a fit moves between
Hopper parts (H800, H100, H200) by their datasheet peaks (our assumption). A profile's own
``grouped_gemm`` fit for the dtype (``measured``) replaces the kernel's constants.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from libra_des.errors import InputError
from libra_des.hardware.compute.kernels import BORROWED_GROUPED, GroupedGemmParams


@dataclass(frozen=True)
class ShapeFit:
    """One fit of a kernel's constants on measurements at one expert shape (a shape family:
    ``hidden`` x ``intermediate`` in the kernel's dtype), with the residuals it reaches on the
    points it was fitted on (``benchmarks/moe_kernel_fit.py`` recomputes them from the data)."""

    hidden: int
    intermediate: int
    params: GroupedGemmParams
    device: str
    data: str  # the file under calibration/public
    points: int  # fitted points (prefill-sized calls)
    median_error: float  # |model / published - 1| over those points
    max_error: float

    @property
    def family(self) -> str:
        return f"h{self.hidden}-i{self.intermediate}"


@dataclass(frozen=True)
class FitChoice:
    """The fit that prices a model's expert shape, and how far that shape is from its data.

    ``distance_octaves``: Euclidean distance in log2 (hidden, intermediate) from the model's
    shape to the fit's; ``extrapolated``: the shape lies outside the box the kernel's fits
    span (per axis, smallest to largest fitted size), so no fit brackets it."""

    kernel: str
    fit: ShapeFit
    distance_octaves: float
    extrapolated: bool

    def report(self) -> dict[str, object]:
        f = self.fit
        return {"kernel": self.kernel, "family": f.family, "hidden": f.hidden,
                "intermediate": f.intermediate, "device": f.device, "data": f.data,
                "median_error": f.median_error, "max_error": f.max_error,
                "distance_octaves": round(self.distance_octaves, 4),
                "extrapolated": self.extrapolated}


@dataclass(frozen=True)
class GroupedKernel:
    """One grouped-GEMM kernel family: dtype, tile geometry, its fits per shape, and source.
    ``params``: the constants in use (the first fit's until :meth:`at_shape` picks one)."""

    name: str
    dtype: str
    blocks: tuple[int, ...]  # M tile heights, smallest first
    block_n: int
    params: GroupedGemmParams
    source: str
    fits: tuple[ShapeFit, ...] = ()

    def choose(self, hidden: int, intermediate: int) -> FitChoice:
        """The fit nearest to ``hidden`` x ``intermediate`` in log2 sizes (ties: the first)."""
        where = np.log2([hidden, intermediate])
        shapes = np.log2([[f.hidden, f.intermediate] for f in self.fits])
        dist = np.sqrt(((shapes - where) ** 2).sum(axis=1))
        best = int(np.argmin(dist))
        inside = bool(np.all((where >= shapes.min(axis=0)) & (where <= shapes.max(axis=0))))
        return FitChoice(self.name, self.fits[best], float(dist[best]), not inside)

    def at_shape(self, hidden: int, intermediate: int) -> tuple[GroupedKernel, FitChoice]:
        """This kernel with the constants of the fit :meth:`choose` picks, and the choice."""
        choice = self.choose(hidden, intermediate)
        return replace(self, params=choice.fit.params), choice


#: Fit of ``fused_moe_h200_bf16_vllm.csv`` (five constants, log-error least squares over its
#: prefill-sized calls; ``benchmarks/moe_kernel_fit.py``), rounded to the digits shown.
TRITON_FUSED_MOE = {
    "efficiency": 0.42, "tile_s": 0.0, "mem_eff": 0.78, "launch_s": 2e-6, "overlap": 2.2,
}
#: Fit of ``fused_moe_h100_bf16_mixtral_vllm.csv``: efficiency and HBM share on its four
#: prefill-sized calls; ``tile_s``, ``launch_s`` and ``overlap`` kept from the fit above
#: (four points cannot pin five constants).
TRITON_FUSED_MOE_WIDE = {**TRITON_FUSED_MOE, "efficiency": 0.57, "mem_eff": 0.80}
#: Fit of ``fused_moe_h100_fp8_qwen3_30b_vllm.csv`` (Triton FP8 W8A8, per-tensor scales):
#: efficiency and HBM share on its seven prefill-sized calls, shares of the FP8 peak; the
#: rest kept from the BF16 fit.
TRITON_FUSED_MOE_FP8 = {**TRITON_FUSED_MOE, "efficiency": 0.115, "mem_eff": 0.56}
#: Efficiency fitted on the three prefill-sized torch._grouped_mm BF16 calls (all
#: compute-bound, so they do not identify the HBM share); ``mem_eff``, ``tile_s`` and
#: ``overlap`` are our assumptions (values of the range Hopper grouped kernels reach),
#: ``launch_s`` the profiles' stated 2 us kernel gap.
CUTLASS_GROUPED = {
    "efficiency": 0.74, "tile_s": 1.8e-6, "mem_eff": 0.86, "launch_s": 2e-6, "overlap": 2.9,
}


def _fit(hidden: int, intermediate: int, params: dict[str, float], device: str, data: str,
         points: int, median: float, worst: float) -> ShapeFit:
    return ShapeFit(hidden, intermediate, GroupedGemmParams.from_dict(params), device, data,
                    points, median, worst)


TRITON_FITS = (
    _fit(2816, 704, TRITON_FUSED_MOE, "NVIDIA H200", "fused_moe_h200_bf16_vllm.csv",
         7, 0.093, 0.112),
    _fit(4096, 7168, TRITON_FUSED_MOE_WIDE, "NVIDIA H100",
         "fused_moe_h100_bf16_mixtral_vllm.csv", 4, 0.031, 0.053),
)
CUTLASS_FITS = (
    # pytorch/ao's Llama4 17Bx16E calls (hidden 5120, expert intermediate 8192).
    _fit(5120, 8192, CUTLASS_GROUPED, "NVIDIA H100 / H200", "grouped_gemm_h100_bf16_torch.csv",
         3, 0.085, 0.108),
)
TRITON_FP8_FITS = (
    # Qwen3-30B-A3B's own expert shape; constants below.
    _fit(2048, 768, TRITON_FUSED_MOE_FP8, "NVIDIA H100", "fused_moe_h100_fp8_qwen3_30b_vllm.csv",
         7, 0.120, 0.224),
)
DEEPGEMM_FITS = (
    # DeepSeek-V3's expert shape (hidden 7168, expert intermediate 2048): the table's grouped
    # calls are its [7168 -> 4096] and [2048 -> 7168] GEMMs.
    _fit(7168, 2048, BORROWED_GROUPED, "NVIDIA H800", "grouped_gemm_h800_fp8_deepgemm.csv",
         28, 0.024, 0.225),
)

KERNELS: dict[str, GroupedKernel] = {
    "triton_fused_moe": GroupedKernel(
        "triton_fused_moe", "bf16", (16, 64, 128), 64, TRITON_FITS[0].params,
        "vLLM fused-MoE tables, H200 (hidden 2816) and H100 (hidden 4096), fitted per shape",
        TRITON_FITS),
    "cutlass_grouped": GroupedKernel(
        "cutlass_grouped", "bf16", (64, 128), 128, CUTLASS_FITS[0].params,
        "torch._grouped_mm BF16 H100/H200 rows (calibration/public), fitted in part",
        CUTLASS_FITS),
    "triton_fused_moe_fp8": GroupedKernel(
        "triton_fused_moe_fp8", "fp8", (16, 64, 128), 64, TRITON_FP8_FITS[0].params,
        "vLLM Triton FP8 fused-MoE table, H100, Qwen3-30B-A3B shape, fitted", TRITON_FP8_FITS),
    "deepgemm_fp8": GroupedKernel(
        "deepgemm_fp8", "fp8", (64, 128), 128, DEEPGEMM_FITS[0].params,
        "DeepGEMM README H800 FP8 table (calibration/public), fitted", DEEPGEMM_FITS),
}


def grouped_kernel(name: str, dtype: str) -> GroupedKernel:
    """The kernel ``name``; bad input when unknown or not a kernel of ``dtype``."""
    kernel = KERNELS.get(name)
    if kernel is None:
        raise InputError("grouped kernel", name, " | ".join(KERNELS))
    if kernel.dtype != dtype:
        fits = [k for k, v in KERNELS.items() if v.dtype == dtype]
        raise InputError("model.dtype", dtype, f"a dtype of {name} ({kernel.dtype}); "
                         f"kernels for {dtype}: {' | '.join(fits) or 'none'}")
    return kernel
