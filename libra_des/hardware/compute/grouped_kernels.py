"""The grouped-GEMM kernels MoE systems ship with, each with its own public measurements.

A kernel is the tile model of :func:`~libra_des.hardware.compute.kernels.grouped_seconds` with its
own
tile geometry and constants, fitted on public measurements of that kernel family:

* ``triton_fused_moe`` (BF16): the Triton fused-MoE kernel (SGLang's default MoE path, shared
  with vLLM). Fitted on vLLM pull request #44818's H200 BF16 table
  (``calibration/public/fused_moe_h200_bf16_vllm.csv``; ``benchmarks/moe_kernel_fit.py``
  re-derives the constants and prints each point's error: median 9.3%, max 11.1% over the
  seven prefill-sized calls, 256-4096 tokens; the decode-sized calls below 256 tokens are
  outside the fit and prefill). The measured calls include the
  SiLU-and-mul and the weighted sum, so the two modelled GEMMs carry them. Tiles: BLOCK_SIZE_M
  16 / 64 / 128 and BLOCK_SIZE_N 64 (the kernel's default and tuned configurations' range).
* ``cutlass_grouped`` (BF16): CUTLASS SM90 grouped GEMM (``torch._grouped_mm``). Efficiency
  fitted on the three prefill-sized BF16 calls of ``grouped_gemm_h100_bf16_torch.csv`` and
  ``grouped_gemm_h200_bf16_torch.csv`` (-7.6%, -5.2%, +4.4%); the other constants are our
  assumptions (three compute-bound points cannot pin five). Tiles 64 / 128 x 128. No shipped
  system uses it; a registered system may name it.
* ``deepgemm_fp8`` (FP8): DeepGEMM's grouped FP8 kernels, fitted on the DeepGEMM README's H800
  table (``grouped_gemm_h800_fp8_deepgemm.csv``; leave-one-size-out median error 3%). The only
  kernel that reads that table: BF16 runs never do (``tests/test_moe_kernels.py``).

Efficiencies are shares of the dtype's own peak and of HBM bandwidth, so a fit moves between
Hopper parts (H800, H100, H200) by their datasheet peaks (our assumption). A profile's own
``grouped_gemm`` fit for the dtype (``measured``) replaces the kernel's constants.
"""

from __future__ import annotations

from dataclasses import dataclass

from libra_des.errors import InputError
from libra_des.hardware.compute.kernels import BORROWED_GROUPED, GroupedGemmParams


@dataclass(frozen=True)
class GroupedKernel:
    """One grouped-GEMM kernel family: dtype, tile geometry, fitted constants and source."""

    name: str
    dtype: str
    blocks: tuple[int, ...]  # M tile heights, smallest first
    block_n: int
    params: GroupedGemmParams
    source: str


#: Fit of ``fused_moe_h200_bf16_vllm.csv`` (all 18 points, log-error least squares;
#: ``benchmarks/moe_kernel_fit.py``), rounded to the digits shown.
TRITON_FUSED_MOE = {
    "efficiency": 0.42, "tile_s": 0.0, "mem_eff": 0.78, "launch_s": 2e-6, "overlap": 2.2,
}
#: Efficiency fitted on the three prefill-sized torch._grouped_mm BF16 calls (all
#: compute-bound, so they do not identify the HBM share); ``mem_eff``, ``tile_s`` and
#: ``overlap`` are our assumptions (values of the range Hopper grouped kernels reach),
#: ``launch_s`` the profiles' stated 2 us kernel gap.
CUTLASS_GROUPED = {
    "efficiency": 0.74, "tile_s": 1.8e-6, "mem_eff": 0.86, "launch_s": 2e-6, "overlap": 2.9,
}

KERNELS: dict[str, GroupedKernel] = {
    "triton_fused_moe": GroupedKernel(
        "triton_fused_moe", "bf16", (16, 64, 128), 64,
        GroupedGemmParams.from_dict(TRITON_FUSED_MOE),
        "vLLM PR #44818 H200 BF16 fused-MoE table (calibration/public), fitted"),
    "cutlass_grouped": GroupedKernel(
        "cutlass_grouped", "bf16", (64, 128), 128,
        GroupedGemmParams.from_dict(CUTLASS_GROUPED),
        "torch._grouped_mm BF16 H100/H200 rows (calibration/public), fitted in part"),
    "deepgemm_fp8": GroupedKernel(
        "deepgemm_fp8", "fp8", (64, 128), 128,
        GroupedGemmParams.from_dict(BORROWED_GROUPED),
        "DeepGEMM README H800 FP8 table (calibration/public), fitted"),
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
