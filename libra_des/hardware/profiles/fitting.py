"""Fit a profile's samples with scipy and cross-validate the fits (leave one size out).

Samples are grouped by (op, group size, GPUs per node, dtype); attention and GEMM use group 1.
Each group gets one :class:`~libra_des.hardware.profiles.profile.Fit`:

- collectives: a piecewise alpha-beta curve (:class:`~libra_des.hardware.collectives.curves.Curve`)
  in the per-rank link volume of the algorithm the measurement is attributed to (NCCL's ring,
  or NVLS when the measured bus bandwidth is above what a ring could move over the link).
  Up to three regimes (NCCL switches protocols and channel counts with size) are found by
  greedy splitting, kept only when they lower the BIC by more than 10;
- attention: the FlashAttention tile model's efficiency, per-CTA cost, heads penalty and
  launch time (:mod:`libra_des.hardware.compute.kernels`);
- GEMM: the roofline's efficiency curve and launch time, per dtype;
- grouped GEMM: the tile model's MMA efficiency, per-tile cost, HBM efficiency and launch time,
  per dtype (:func:`~libra_des.hardware.compute.kernels.grouped_seconds`).

All fits minimise squared log errors (relative error, so small and large sizes count alike).
Cross-validation leaves out every sample of one size at a time, refits, and predicts them.
For multi-regime curves the regime boundaries found on all samples are kept and only the
regime holding the left-out size is refitted (boundaries chosen from hundreds of sizes barely
move when one is left out; refitting them per fold would make CV minutes long).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from libra_des.hardware.collectives.curves import DEFAULT_ALGORITHM, Curve, flat_rate, phase_shape
from libra_des.hardware.compute.kernels import (
    AttentionParams,
    GemmParams,
    GroupedGemmParams,
    attention_call,
    attention_work,
    gemm_body,
    grouped_seconds,
    grouped_shape,
    shard_pairs,
    sm_count,
)
from libra_des.hardware.profiles.profile import (
    COLLECTIVE_OPS,
    DTYPE_BYTES,
    KERNEL_OPS,
    Fit,
    Piece,
    Profile,
    Sample,
)

GroupKey = tuple[str, int, int, str]
MAX_PIECES = 3
BIC_GAIN = 10.0


@dataclass(frozen=True)
class FitResult:
    """A fit and its errors (percent) in sample and, when asked, cross-validated."""

    fit: Fit
    fit_errors: np.ndarray
    cv_errors: np.ndarray | None

    def row(self) -> dict[str, object]:
        errs = self.cv_errors if self.cv_errors is not None else self.fit_errors
        f = self.fit
        return {
            "op": f.op,
            "group": f.group,
            "gpus_per_node": f.gpus_per_node or f.group,
            "algorithm": f.algorithm,
            "dtype": f.dtype,
            "kind": "cv" if self.cv_errors is not None else "in_sample",
            "median_abs_pct_error": round(float(np.median(errs)), 4),
            "p90_abs_pct_error": round(float(np.percentile(errs, 90)), 4),
            "n": int(errs.size),
        }


def pct_errors(predicted: np.ndarray, measured: np.ndarray) -> np.ndarray:
    result: np.ndarray = np.abs(np.asarray(predicted) / np.asarray(measured) - 1.0) * 100.0
    return result


def group_key(s: Sample) -> GroupKey:
    if s.op in COLLECTIVE_OPS:
        return (s.op, s.group, min(s.gpus_per_node or s.group, s.group), "")
    return (s.op, 1, 1, s.gemm.dtype if s.gemm else "")


def group_samples(samples: Iterable[Sample]) -> dict[GroupKey, list[Sample]]:
    """Samples by fit key; ops without a fitted model are left out."""
    groups: dict[GroupKey, list[Sample]] = defaultdict(list)
    for s in samples:
        if s.op in COLLECTIVE_OPS or s.op in KERNEL_OPS:
            groups[group_key(s)].append(s)
    return dict(sorted(groups.items()))


def sample_size(s: Sample) -> float:
    """The size a CV fold leaves out: bytes, pair-weighted document length, or m*n*k."""
    if s.nbytes is not None:
        return float(s.nbytes)
    if s.attention is not None:
        lens = np.array([d[0] for d in s.attention.docs], dtype=np.float64)
        weight = np.array([d[1] for d in s.attention.docs]) * lens * (lens + 1) / 2
        return float(np.dot(weight, lens) / weight.sum())
    assert s.gemm is not None
    return float(sum(s.gemm.expert_rows(s.group)) * s.gemm.n * s.gemm.k)


def sources(samples: list[Sample]) -> str:
    names = sorted({Path(s.source).name for s in samples if s.source})
    return f"fit of {len(samples)} samples from " + ", ".join(names or ["unnamed samples"])


def fit_profile(profile: Profile, cv: bool = False) -> tuple[Profile, list[FitResult]]:
    """Fit every sample group of ``profile``; fits of groups without samples are kept."""
    results = [
        fit_group(profile, key, ss, cv) for key, ss in group_samples(profile.samples).items()
    ]
    return profile.with_fits(tuple(r.fit for r in results)), results


def fit_group(profile: Profile, key: GroupKey, samples: list[Sample], cv: bool) -> FitResult:
    op = key[0]
    if op in COLLECTIVE_OPS:
        return CollectiveFitter(profile, key, samples).run(cv)
    if op == "attention":
        return ParamFitter(AttentionModel(profile, samples), samples).run(cv)
    if op == "grouped_gemm":
        return ParamFitter(GroupedGemmModel(profile, samples), samples).run(cv)
    return ParamFitter(GemmModel(profile, samples), samples).run(cv)


def with_errors(fit: Fit, fit_err: np.ndarray, cv_err: np.ndarray | None) -> FitResult:
    update: dict[str, object] = {"fit_median_abs_pct_error": round(float(np.median(fit_err)), 4)}
    if cv_err is not None:
        update["cv_median_abs_pct_error"] = round(float(np.median(cv_err)), 4)
        update["cv_p90_abs_pct_error"] = round(float(np.percentile(cv_err, 90)), 4)
    return FitResult(fit.model_copy(update=update), fit_err, cv_err)


# ----------------------------------------------------------------------------- collectives


class CollectiveFitter:
    """Piecewise alpha-beta fit of one (op, group, layout) sample group."""

    def __init__(self, profile: Profile, key: GroupKey, samples: list[Sample]) -> None:
        self.op, self.group, self.gpn, _ = key
        self.samples = samples
        nodes = math.ceil(self.group / self.gpn)
        fabric = profile.interconnect.fabric(nodes)
        self.rate = flat_rate(fabric, self.group, self.gpn)
        self.size = np.array([s.nbytes for s in samples], dtype=np.float64)
        self.time = np.array([s.time.median for s in samples], dtype=np.float64)
        nvls_ok = self.op in profile.interconnect.nvls_ops and self.group <= self.gpn
        self.algorithm = self.attribute(nvls_ok)
        self.volume, self.steps = phase_shape(self.op, self.algorithm, self.group, self.size)

    def attribute(self, nvls_ok: bool) -> str:
        """The default algorithm, unless the measured rate is impossible for it over the
        link and NVLS (whose volume is smaller) is available and makes it possible."""
        default = DEFAULT_ALGORITHM[self.op]
        volume, _ = phase_shape(self.op, default, self.group, self.size)
        if not nvls_ok or np.max(volume / self.time) <= self.rate:
            return default
        return "nvls"

    def run(self, cv: bool) -> FitResult:
        order = np.argsort(self.volume, kind="stable")
        v, t = self.volume[order], self.time[order]
        bounds, params = split_regimes(v, t, self.rate, self.steps)
        pieces = to_pieces(v, bounds, params, self.steps)
        curve = Curve(pieces, "measured")
        fitted = curve.seconds(self.volume, self.rate, self.steps)
        cv_err = self.cross_validate(v, t, bounds, params) if cv else None
        fit = Fit(
            op=self.op,
            group=self.group,
            gpus_per_node=self.gpn,
            algorithm=self.algorithm,
            model="alpha_beta",
            pieces=pieces,
            link_bw=self.rate,
            n=len(self.samples),
            size_min=float(self.size.min()),
            size_max=float(self.size.max()),
            points=self.points(curve),
            source=sources(self.samples),
        )
        return with_errors(fit, pct_errors(fitted, self.time), cv_err)

    def points(self, curve: Curve) -> tuple[tuple[float, float], ...]:
        """A few fitted (size, seconds) points across the measured range, for reading."""
        sizes = np.geomspace(self.size.min(), self.size.max(), 5)
        volume, _ = phase_shape(self.op, self.algorithm, self.group, sizes)
        secs = curve.seconds(volume, self.rate, self.steps)
        return tuple(
            (float(f"{s:.6g}"), float(f"{x:.6g}")) for s, x in zip(sizes, secs, strict=True)
        )

    def cross_validate(
        self, v: np.ndarray, t: np.ndarray, bounds: list[int], params: list[np.ndarray]
    ) -> np.ndarray:
        errors = np.empty(v.size)
        for size in np.unique(v):
            out = v == size
            seg = max(i for i, b in enumerate(bounds[:-1]) if v[b] <= size)
            lo, hi = bounds[seg], bounds[seg + 1]
            keep = ~out[lo:hi]
            trial = list(params)
            if keep.sum() >= 4:
                trial[seg] = fit_regime(
                    v[lo:hi][keep], t[lo:hi][keep], self.rate, self.steps, params[seg]
                )[0]
            pieces = to_pieces(v, bounds, trial, self.steps)
            pred = Curve(pieces, "cv").seconds(v[out], self.rate, self.steps)
            errors[out] = pct_errors(pred, t[out])
        return errors


def regime_parts(x: np.ndarray, v: np.ndarray, rate: float) -> tuple[float, np.ndarray, np.ndarray]:
    """(alpha, bandwidth term, sub-linear 'slow' term) of one regime; see :class:`Piece`.

    ``x`` = (log alpha total, log eta, log half, gamma).
    """
    alpha, eta, gamma = math.exp(x[0]), math.exp(x[1]), x[3]
    slow = np.exp(gamma * (x[2] - np.log(v))) * v
    return alpha, (v + slow) / (rate * eta), slow / (rate * eta)


LOWER = np.array([-40.0, -12.0, -5.0, 0.02])
UPPER = np.array([0.0, 0.0, 40.0, 1.0])


def fit_regime(
    v: np.ndarray, t: np.ndarray, rate: float, steps: int, x0: np.ndarray | None = None
) -> tuple[np.ndarray, float]:
    """Least squares in log time with an analytic Jacobian; bounds keep eta <= 1 and
    gamma <= 1 (bus bandwidth under the link rate, time non-decreasing in bytes)."""
    if x0 is None:
        eta0 = min(0.95, float(np.max(v / t)) / rate * 1.05)
        x0 = np.array(
            [
                math.log(max(float(t.min()) * 0.5, 1e-7)),
                math.log(max(eta0, 1e-4)),
                math.log(float(np.median(v))),
                0.5,
            ]
        )
    x0 = np.clip(x0, LOWER + 1e-9, UPPER - 1e-9)
    log_t, log_v = np.log(t), np.log(v)

    def resid(x: np.ndarray) -> np.ndarray:
        alpha, band, _ = regime_parts(x, v, rate)
        return np.asarray(np.log(alpha + band) - log_t)

    def jac(x: np.ndarray) -> np.ndarray:
        alpha, band, slow = regime_parts(x, v, rate)
        cols = (np.full_like(v, alpha), -band, x[3] * slow, slow * (x[2] - log_v))
        return np.stack(cols, axis=1) / (alpha + band)[:, None]

    res = least_squares(resid, x0, jac=jac, bounds=(LOWER, UPPER), ftol=1e-6, xtol=1e-6)
    return res.x, float(np.sum(res.fun**2))


def split_regimes(
    v: np.ndarray, t: np.ndarray, rate: float, steps: int
) -> tuple[list[int], list[np.ndarray]]:
    """Greedy regime split of sorted samples; returns boundary indices and regime params.

    Each round picks the best cut of any regime (searched on a thinned copy of its samples
    for speed), refits both halves on all their samples, and keeps the split only if the BIC
    drops by more than ``BIC_GAIN``.
    """
    n = v.size
    min_pts = max(8, n // 20)
    bounds = [0, n]
    first = fit_regime(v, t, rate, steps)
    params, sse = [first[0]], [first[1]]
    bic = bic_of(sum(sse), n, 1)
    while len(params) < MAX_PIECES:
        found = best_cut(v, t, rate, steps, bounds, min_pts, params)
        if found is None:
            break
        seg, cut = found
        lo, hi = bounds[seg], bounds[seg + 1]
        left = fit_regime(v[lo:cut], t[lo:cut], rate, steps, params[seg])
        right = fit_regime(v[cut:hi], t[cut:hi], rate, steps, params[seg])
        total = sum(sse) - sse[seg] + left[1] + right[1]
        trial = bic_of(total, n, len(params) + 1)
        if trial > bic - BIC_GAIN:
            break
        bic = trial
        bounds.insert(seg + 1, cut)
        params[seg : seg + 1] = [left[0], right[0]]
        sse[seg : seg + 1] = [left[1], right[1]]
    return bounds, params


def best_cut(
    v: np.ndarray,
    t: np.ndarray,
    rate: float,
    steps: int,
    bounds: list[int],
    min_pts: int,
    parent: list[np.ndarray],
) -> tuple[int, int] | None:
    """(regime, cut index) whose two-regime fit lowers the squared error most, judged on at
    most ~128 evenly thinned samples per regime, warm-started from the parent regime."""
    best: tuple[float, int, int] | None = None
    for seg in range(len(bounds) - 1):
        lo, hi = bounds[seg], bounds[seg + 1]
        if hi - lo < 2 * min_pts:
            continue
        thin = max(1, (hi - lo) // 128)
        base = fit_regime(v[lo:hi:thin], t[lo:hi:thin], rate, steps, parent[seg])[1]
        stride = max(1, (hi - lo - 2 * min_pts) // 16)
        for cut in range(lo + min_pts, hi - min_pts + 1, stride):
            if v[cut] == v[cut - 1]:
                continue
            left = fit_regime(v[lo:cut:thin], t[lo:cut:thin], rate, steps, parent[seg])[1]
            right = fit_regime(v[cut:hi:thin], t[cut:hi:thin], rate, steps, parent[seg])[1]
            gain = (left + right - base) * thin
            if best is None or gain < best[0]:
                best = (gain, seg, cut)
    return None if best is None else (best[1], best[2])


def bic_of(sse: float, n: int, regimes: int) -> float:
    k = 4 * regimes + (regimes - 1)
    return n * math.log(max(sse, 1e-300) / n) + k * math.log(n)


def to_pieces(
    v: np.ndarray, bounds: list[int], params: list[np.ndarray], steps: int
) -> tuple[Piece, ...]:
    out = []
    for i, x in enumerate(params):
        start = 0.0 if i == 0 else float(v[bounds[i]])
        out.append(
            Piece(
                start=start,
                alpha_step=math.exp(x[0]) / max(steps, 1),
                eta=min(1.0, math.exp(x[1])),
                half=math.exp(x[2]),
                gamma=float(min(1.0, x[3])),
            )
        )
    return tuple(out)


# ----------------------------------------------------------------------------- kernels


class ParamModel:
    """A kernel model with a parameter vector fitted in log space."""

    names: tuple[str, ...]
    x0: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    def predict(self, x: np.ndarray, idx: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def fit_object(self, x: np.ndarray, samples: list[Sample]) -> Fit:
        raise NotImplementedError


class ParamFitter:
    """Fits a :class:`ParamModel`; CV leaves each distinct size out in turn."""

    def __init__(self, model: ParamModel, samples: list[Sample]) -> None:
        self.model = model
        self.samples = samples
        self.time = np.array([s.time.median for s in samples], dtype=np.float64)
        self.size = np.array([sample_size(s) for s in samples], dtype=np.float64)

    def solve(self, idx: np.ndarray, x0: np.ndarray) -> np.ndarray:
        def resid(x: np.ndarray) -> np.ndarray:
            result: np.ndarray = np.log(self.model.predict(x, idx)) - np.log(self.time[idx])
            return result

        return np.asarray(least_squares(resid, x0, bounds=(self.model.lower, self.model.upper)).x)

    def run(self, cv: bool) -> FitResult:
        every = np.arange(len(self.samples))
        x = self.solve(every, self.model.x0)
        fit_err = pct_errors(self.model.predict(x, every), self.time)
        cv_err = None
        if cv:
            cv_err = np.empty(every.size)
            for size in np.unique(self.size):
                out = self.size == size
                if out.all():
                    cv_err[out] = fit_err[out]
                    continue
                xi = self.solve(every[~out], x)
                cv_err[out] = pct_errors(self.model.predict(xi, every[out]), self.time[out])
        return with_errors(self.model.fit_object(x, self.samples), fit_err, cv_err)


class AttentionModel(ParamModel):
    """Fits efficiency, CTA cost, heads penalty and launch time of the tile model (forward).

    All samples' document runs are flattened into one array so a prediction is a handful of
    numpy calls, not a Python loop per sample.
    """

    names = ("efficiency", "cta_s", "heads_half", "launch_s")

    def __init__(self, profile: Profile, samples: list[Sample]) -> None:
        self.base = AttentionParams.from_kernels(profile.kernels)
        self.peak = profile.peak_flops("bf16")
        shapes = [s.attention for s in samples if s.attention is not None]
        runs = [(i, d[0], d[1], a.cp, a.head_dim) for i, a in enumerate(shapes) for d in a.docs]
        owner, length, count, cp, dim = (
            np.array(c, dtype=np.float64) for c in zip(*runs, strict=True)
        )
        self.owner = owner.astype(np.int64)
        self.q, self.k = length / cp, (0.5 + 0.5 / cp) * length
        self.count, self.dim = count, dim
        self.heads = np.array([a.heads_q for a in shapes], dtype=np.float64)
        self.x0 = np.log(
            [
                self.base.efficiency,
                max(self.base.cta_s, 1e-9),
                max(self.base.heads_half, 1e-2),
                max(self.base.launch_s, 1e-7),
            ]
        )
        self.lower = np.log([1e-3, 1e-12, 1e-3, 1e-8])
        self.upper = np.log([1.0, 1e-5, 64.0, 1e-2])

    def params(self, x: np.ndarray) -> AttentionParams:
        return AttentionParams.from_dict(dict(zip(self.names, np.exp(x), strict=True)), self.base)

    def predict(self, x: np.ndarray, idx: np.ndarray) -> np.ndarray:
        p = self.params(x)
        per_run = self.count * attention_work(p, self.peak, self.q, self.k, self.dim, False)
        work = np.bincount(self.owner, weights=per_run, minlength=self.heads.size)
        result: np.ndarray = np.asarray(attention_call(p, self.heads * work, self.heads))[idx]
        return result

    def fit_object(self, x: np.ndarray, samples: list[Sample]) -> Fit:
        pairs = np.bincount(self.owner, weights=self.count * shard_pairs(self.q, self.k))
        return Fit(
            op="attention",
            model="flash_tiles",
            params=self.params(x).to_dict(),
            n=len(samples),
            size_min=float(pairs.min()),
            size_max=float(pairs.max()),
            source=sources(samples),
        )


class GemmModel(ParamModel):
    """Fits the roofline efficiency curve and launch time of one dtype."""

    names = ("efficiency", "half_flops", "gamma", "launch_s")

    def __init__(self, profile: Profile, samples: list[Sample]) -> None:
        shapes = [s.gemm for s in samples if s.gemm is not None]
        self.dtype = shapes[0].dtype
        self.peak = profile.peak_flops(self.dtype)
        self.hbm = profile.hbm_bw
        self.m = np.array([g.m for g in shapes], dtype=np.float64)
        self.n = np.array([g.n for g in shapes], dtype=np.float64)
        self.k = np.array([g.k for g in shapes], dtype=np.float64)
        base = GemmParams.from_kernels(profile.kernels)
        self.x0 = np.log([base.efficiency, base.half_flops, base.gamma, max(base.launch_s, 1e-7)])
        self.lower = np.log([1e-3, 1.0, 0.02, 1e-8])
        self.upper = np.log([1.0, 1e15, 1.0, 1e-2])

    def params(self, x: np.ndarray) -> GemmParams:
        return GemmParams.from_dict(dict(zip(self.names, np.exp(x), strict=True)))

    def predict(self, x: np.ndarray, idx: np.ndarray) -> np.ndarray:
        p = self.params(x)
        nbytes = DTYPE_BYTES[self.dtype]
        body = gemm_body(p, self.peak, self.hbm, self.m[idx], self.n[idx], self.k[idx], nbytes)
        return np.asarray(p.launch_s + body)

    def fit_object(self, x: np.ndarray, samples: list[Sample]) -> Fit:
        flops = 2 * self.m * self.n * self.k
        return Fit(
            op="gemm",
            dtype=self.dtype,
            model="gemm_roofline",
            params=self.params(x).to_dict(),
            n=len(samples),
            size_min=float(flops.min()),
            size_max=float(flops.max()),
            source=sources(samples),
        )


class GroupedGemmModel(ParamModel):
    """Fits the grouped-GEMM tile model of one dtype (MMA efficiency, per-tile cost, HBM
    efficiency, launch time); tiles, M tile and bytes of every sample are fixed by its shape."""

    names = ("efficiency", "tile_s", "mem_eff", "launch_s", "overlap")
    #: Starting point (our assumption; the fit moves away from it).
    START = (0.7, 1e-6, 0.8, 3e-6, 4.0)

    def __init__(self, profile: Profile, samples: list[Sample]) -> None:
        shapes = [(s.gemm, s.group) for s in samples if s.gemm is not None]
        self.dtype = shapes[0][0].dtype
        self.peak = profile.peak_flops(self.dtype)
        self.hbm = profile.hbm_bw
        self.sms = sm_count(profile.device)
        nbytes = DTYPE_BYTES[self.dtype]
        geo = [grouped_shape(np.array(g.expert_rows(e)), g.n, g.k, nbytes) for g, e in shapes]
        self.tiles = np.array([x.tiles for x in geo])
        self.block_m = np.array([x.block_m for x in geo])
        self.bytes = np.array([x.bytes for x in geo])
        self.k = np.array([g.k for g, _ in shapes], dtype=np.float64)
        self.flops = np.array([2.0 * sum(g.expert_rows(e)) * g.n * g.k for g, e in shapes])
        self.x0 = np.log(self.START)
        self.lower = np.log([1e-3, 1e-9, 1e-2, 1e-8, 1.0])
        self.upper = np.log([1.0, 1e-3, 1.0, 1e-3, 64.0])

    def params(self, x: np.ndarray) -> GroupedGemmParams:
        return GroupedGemmParams.from_dict(dict(zip(self.names, np.exp(x), strict=True)))

    def predict(self, x: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return grouped_seconds(self.params(x), self.peak, self.hbm, self.sms, self.tiles[idx],
                               self.block_m[idx], self.bytes[idx], self.k[idx])

    def fit_object(self, x: np.ndarray, samples: list[Sample]) -> Fit:
        return Fit(
            op="grouped_gemm",
            dtype=self.dtype,
            model="grouped_tiles",
            params=self.params(x).to_dict(),
            n=len(samples),
            size_min=float(self.flops.min()),
            size_max=float(self.flops.max()),
            source=sources(samples),
        )
