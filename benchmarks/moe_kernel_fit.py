"""Fit the grouped-GEMM kernels of ``hardware/compute/grouped_kernels.py`` per shape family and
print every fit's residuals, from the public measurements in ``calibration/public``.

A shape family is one (hidden, expert intermediate, dtype) point a table was measured at:

* Triton fused MoE, BF16: vLLM's H200 table at hidden 2816 / intermediate 704 (all five
  tile-model constants) and its H100 Mixtral table at hidden 4096 / intermediate 7168
  (efficiency and HBM share; the rest kept from the first fit). Each call is two grouped
  GEMMs (``[rows, K] x [K, 2N]`` then ``[rows, N] x [N, K]``) over the experts, with the
  benchmark's random routing taken as its expectation (``M * top_k`` pairs spread evenly).
* CUTLASS grouped GEMM, BF16: efficiency and HBM share on the three prefill-sized
  torch._grouped_mm calls (H100 uneven 16-expert calls, H200 16 x 128000 rows).
* Triton fused MoE, FP8 (per-tensor W8A8): vLLM's H100 table at Qwen3-30B-A3B's 2048 x 768
  (efficiency and HBM share).
* DeepGEMM, FP8: the README's H800 table (the constants come from ``profile import --cv``).

Prefill-sized calls only: from 256 tokens every expert of a 128-expert table is active; below,
the published calls are decode shapes dominated by what the tile model omits (routing
alignment, a grid sized for every expert), listed but outside every fit. The DeepGEMM
constants are also checked on the Triton FP8 table (a check, not a fit: another kernel).

    .venv/bin/python benchmarks/moe_kernel_fit.py
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from libra_des.hardware.compute.grouped_kernels import KERNELS, GroupedKernel, ShapeFit
from libra_des.hardware.compute.kernels import GroupedGemmParams, grouped_seconds, grouped_shapes
from libra_des.hardware.profiles.profile import load_profile

PUBLIC = Path(__file__).resolve().parents[1] / "calibration" / "public"
SMS = 132
PREFILL_TOKENS = 256
#: Device of a table -> the shipped profile whose peaks price it (H800: H100 SXM silicon).
PROFILES = {"NVIDIA H200": "h200-sxm", "NVIDIA H100": "h100-sxm", "NVIDIA H800": "h100-sxm"}


def rows(path: Path) -> list[dict[str, str]]:
    lines = [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]
    return list(csv.DictReader(lines))


@dataclass(frozen=True)
class Point:
    """One published call: a label, its launches ``(rows per expert, n, k)``, its device,
    dtype, seconds, and whether it is prefill-sized (inside the fit)."""

    label: str
    launches: tuple[tuple[np.ndarray, float, float], ...]
    device: str
    dtype: str
    seconds: float
    fitted: bool


def even_rows(tokens: int, top_k: int, experts: int) -> np.ndarray:
    """Expected rows per expert of random routing: ``tokens * top_k`` pairs spread evenly."""
    pairs = tokens * top_k
    out = np.full(experts, pairs // experts, dtype=np.float64)
    out[: pairs % experts] += 1
    return out


def fused_points(name: str) -> list[Point]:
    """A fused-MoE table: each call is the gate-up then the down grouped GEMM."""
    out = []
    for r in rows(PUBLIC / name):
        e, top, h, f, m = (int(r[c]) for c in ("experts", "top_k", "hidden", "intermediate",
                                               "tokens"))
        er = even_rows(m, top, e)
        out.append(Point(f"M={m}", ((er, 2.0 * f, float(h)), (er, float(h), float(f))),
                         r["device"], r["dtype"], float(r["time_us"]) * 1e-6,
                         m >= PREFILL_TOKENS))
    return out


def grouped_points(name: str) -> list[Point]:
    """A grouped-GEMM table: one launch per row (time derived from TFLOPS when not given)."""
    out = []
    for r in rows(PUBLIC / name):
        n, k = float(r["n"]), float(r["k"])
        if r["layout"] == "offsets":
            er = np.array([float(v) for v in r["rows"].split(";")])
        else:
            er = np.full(int(r["groups"]), float(r["rows"]))
        flops = 2.0 * er.sum() * n * k
        sec = float(r["time_us"]) * 1e-6 if r["time_us"] else flops / (float(r["tflops"]) * 1e12)
        label = f"{r['layout']} {len(er)}x{int(er.max())} n={int(n)} k={int(k)}"
        out.append(Point(label, ((er, n, k),), r["device"], r["dtype"], sec, er.max() >= 64))
    return out


#: The table each fit was made on, read as points.
READERS: dict[str, Callable[[str], list[Point]]] = {
    "fused_moe_h200_bf16_vllm.csv": fused_points,
    "fused_moe_h100_bf16_mixtral_vllm.csv": fused_points,
    "fused_moe_h100_fp8_qwen3_30b_vllm.csv": fused_points,
    "grouped_gemm_h800_fp8_deepgemm.csv": grouped_points,
}


def fit_points(fit: ShapeFit) -> list[Point]:
    """Every point of the table behind ``fit`` (the CUTLASS fit reads both BF16 torch tables)."""
    if fit.data == "grouped_gemm_h100_bf16_torch.csv":
        return [*grouped_points(fit.data), *grouped_points("grouped_gemm_h200_bf16_torch.csv")]
    return READERS[fit.data](fit.data)


def model_seconds(kernel: GroupedKernel, params: GroupedGemmParams, pt: Point) -> float:
    """The tile model's seconds for one published call (its launches summed)."""
    prof = load_profile(PROFILES[pt.device])
    peak, hbm = prof.peak_flops(pt.dtype), prof.hbm_bw
    nbytes = 1 if pt.dtype == "fp8" else 2
    total = 0.0
    for er, n, k in pt.launches:
        tiles, block_m, moved = grouped_shapes(er[None, :], n, k, nbytes, kernel.blocks,
                                               kernel.block_n)
        total += float(grouped_seconds(params, peak, hbm, SMS, tiles, block_m, moved,
                                       np.array([k]), kernel.block_n)[0])
    return total


@dataclass(frozen=True)
class Residual:
    label: str
    published_s: float
    model_s: float
    fitted: bool

    @property
    def error(self) -> float:
        return self.model_s / self.published_s - 1.0


def residuals(kernel: GroupedKernel, fit: ShapeFit, points: list[Point] | None = None
              ) -> list[Residual]:
    """Model against every published point of ``fit``'s table, with the fit's constants."""
    pts = fit_points(fit) if points is None else points
    return [Residual(p.label, p.seconds, model_seconds(kernel, fit.params, p), p.fitted)
            for p in pts]


def summary(res: list[Residual]) -> tuple[int, float, float]:
    """(points, median |error|, max |error|) over the fitted points."""
    errs = np.abs([r.error for r in res if r.fitted])
    return len(errs), float(np.median(errs)), float(errs.max())


def refit(kernel: GroupedKernel, fit: ShapeFit, free: tuple[str, ...]) -> dict[str, float]:
    """Least squares on log error over the fitted points, ``free`` constants only."""
    pts = [p for p in fit_points(fit) if p.fitted]
    base = fit.params.to_dict()

    def params(x: np.ndarray) -> GroupedGemmParams:
        return GroupedGemmParams.from_dict({**base, **dict(zip(free, x, strict=True))})

    def resid(x: np.ndarray) -> np.ndarray:
        p = params(x)
        return np.array([np.log(model_seconds(kernel, p, pt) / pt.seconds) for pt in pts])

    x0 = np.array([base[n] for n in free])
    res = least_squares(resid, x0, bounds=([0.05] * len(free), [1.0] * len(free)))
    return dict(zip(free, (float(v) for v in res.x), strict=True))


#: What each family's fit leaves free (the rest kept, as grouped_kernels.py states).
FREE = {
    ("triton_fused_moe", "h4096-i7168"): ("efficiency", "mem_eff"),
    ("cutlass_grouped", "h5120-i8192"): ("efficiency",),
    ("triton_fused_moe_fp8", "h2048-i768"): ("efficiency", "mem_eff"),
}


def residual_table() -> list[tuple[str, ShapeFit, list[Residual]]]:
    """Every kernel's every fit with its residuals, shipped constants."""
    return [(name, fit, residuals(kernel, fit))
            for name, kernel in KERNELS.items() for fit in kernel.fits]


def main() -> None:
    print("| kernel | family (hidden x intermediate) | device | points | median | max |")
    print("| --- | --- | --- | --- | --- | --- |")
    table = residual_table()
    for name, fit, res in table:
        n, med, worst = summary(res)
        print(f"| {name} | {fit.hidden} x {fit.intermediate} | {fit.device} | {n} | "
              f"{100 * med:.1f}% | {100 * worst:.1f}% |")
    for name, fit, res in table:
        kernel = KERNELS[name]
        free = FREE.get((name, fit.family))
        if free:
            print(f"\n{name} {fit.family} refit of {free}: {refit(kernel, fit, free)}")
        print(f"\n{name} {fit.family} ({fit.data}):")
        for r in res:
            tag = "" if r.fitted else "  (outside the fit)"
            print(f"  {r.label:>28} | published {r.published_s * 1e6:8.1f} us | model "
                  f"{r.model_s * 1e6:8.1f} us | {100 * r.error:+6.1f}%{tag}")
    check = fused_points("fused_moe_h100_fp8_qwen3_30b_vllm.csv")
    fp8 = KERNELS["deepgemm_fp8"]
    res = residuals(fp8, fp8.fits[0], check)
    n, med, worst = summary(res)
    print(f"\ncheck, not fitted: deepgemm_fp8 constants on the Triton FP8 Qwen3-30B-A3B table "
          f"(2048 x 768, H100): median {100 * med:.1f}%, max {100 * worst:.1f}% over {n} calls")


if __name__ == "__main__":
    main()
