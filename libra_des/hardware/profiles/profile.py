"""Calibration profiles: one device's datasheet numbers, raw measurements and fitted models.

A profile is a versioned JSON document (``schema_version: 1``). Every datasheet number is a
:class:`Sourced` value that names where it comes from; raw ``samples`` hold what was measured
(op, bytes or shape, group size, per-node layout, time statistics, source file); ``fits`` hold
the parameters fitted from those samples. Shipped profiles (``calibration/profiles/``) carry
fits but no samples: derived numbers may ship, the measured data files may not.

Units everywhere: seconds, bytes, bytes/s, FLOP/s. Link bandwidths are per direction.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from libra_des.base.storage import dumps, write_atomic
from libra_des.config import ROOT, Frozen, pydantic_line
from libra_des.config.validation import is_file, parse_json, read_bounded
from libra_des.errors import InputError
from libra_des.hardware.fabric.rates import Fabric

SCHEMA_VERSION = 1
PROFILE_DIR = ROOT / "calibration" / "profiles"
DEFAULT_PROFILE = "h200-sxm"
COLLECTIVE_OPS = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "reduce",
    "send_recv",
    "all_to_all",
)
KERNEL_OPS = ("attention", "gemm", "grouped_gemm")
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "tf32": 4, "fp8": 1}


class Sourced(Frozen):
    """A number and where it comes from (datasheet, measurement, or a named assumption)."""

    value: float = Field(ge=0)
    source: str = Field(min_length=1)


class Peaks(Frozen):
    """Dense (non-sparse) peak throughputs of one GPU."""

    bf16_flops: Sourced
    fp16_flops: Sourced
    fp32_flops: Sourced
    hbm_bytes_per_s: Sourced
    tf32_flops: Sourced | None = None
    fp8_flops: Sourced | None = None

    @model_validator(mode="after")
    def _positive(self) -> Peaks:
        # A zero peak divides MFU by zero; an absurd one makes every kernel free. 10^17 FLOP/s
        # (100 PFLOP/s) and 10^14 B/s per GPU are far above any datasheet (our bound).
        for name in type(self).model_fields:
            peak = getattr(self, name)
            hi = 1e14 if name == "hbm_bytes_per_s" else 1e17
            if peak is not None and not 0 < peak.value <= hi:
                raise InputError(f"{name}.value", peak.value, f"> 0 and <= {hi:g}")
        return self


class Interconnect(Frozen):
    """The machine the profile was measured on (its fits are relative to these link rates).

    ``intra_bw``: one GPU's NVLink (or PCIe) bandwidth per direction; ``inter_bw``: one NIC
    port; ``nvls_ops``: collectives for which NVLink SHARP (in-switch reduction) is available.
    ``topology``: the shipped topology file describing this machine, if any.
    """

    name: str
    topology: str | None = None
    intra_kind: Literal["nvswitch", "pcie"] = "nvswitch"
    gpus_per_node: int = Field(gt=0)
    nics_per_node: int = Field(ge=0)
    intra_bw: Sourced
    inter_bw: Sourced
    intra_latency: Sourced
    inter_latency: Sourced
    nvls_ops: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _links(self) -> Interconnect:
        for name in ("intra_bw", "inter_bw"):
            if not getattr(self, name).value > 0:
                raise InputError(f"{name}.value", getattr(self, name).value, "> 0 bytes/s")
        return self

    def fabric(self, nodes: int = 1) -> Fabric:
        """A :class:`Fabric` with this machine's numbers (no topology file needed)."""
        return Fabric(
            gpus_per_node=self.gpus_per_node,
            nodes=nodes,
            intra_kind=self.intra_kind,
            intra_bw=self.intra_bw.value,
            intra_latency=self.intra_latency.value,
            inter_bw=self.inter_bw.value,
            inter_latency=self.inter_latency.value,
            nics_per_node=self.nics_per_node,
            nvls=bool(self.nvls_ops),
        )


class Kernels(Frozen):
    """Kernel-model constants used where the profile has no fit for an op.

    GEMM: roofline ``max(F / (peak * eff(F)), bytes / hbm)`` with
    ``eff(F) = gemm_efficiency / (1 + (gemm_half_flops / F) ** gemm_gamma)``.
    Attention: the FlashAttention tile model of :mod:`libra_des.hardware.compute.kernels`.
    """

    launch_s: Sourced
    elementwise_efficiency: Sourced
    gemm_efficiency: Sourced
    gemm_half_flops: Sourced
    gemm_gamma: Sourced
    attention_efficiency: Sourced
    attention_cta_s: Sourced
    attention_heads_half: Sourced
    attention_launch_s: Sourced
    attention_bwd_ratio: Sourced
    attention_bwd_flops: Sourced


class TimeStats(Frozen):
    """Time statistics of one measured case, in seconds."""

    median: float = Field(gt=0)
    mean: float | None = Field(default=None, gt=0)
    min: float | None = Field(default=None, gt=0)
    max: float | None = Field(default=None, gt=0)
    std: float | None = Field(default=None, ge=0)


class AttentionShape(Frozen):
    """One varlen causal attention call: ``docs`` as (length, count) runs.

    With ``cp`` > 1 each document contributes ``len/cp`` queries against
    ``(1/2 + 1/(2 cp)) * len`` keys (the average causal context-parallel shard).
    """

    docs: tuple[tuple[int, int], ...] = Field(min_length=1)
    heads_q: int = Field(gt=0)
    heads_kv: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    cp: int = Field(default=1, gt=0)


class GemmShape(Frozen):
    """``[m, k] x [k, n]``. For a grouped GEMM ``m`` is every expert's rows unless ``rows``
    lists them per expert (uneven routing; ``m`` is then their maximum)."""

    m: int = Field(gt=0)
    n: int = Field(gt=0)
    k: int = Field(gt=0)
    dtype: str = "bf16"
    rows: tuple[int, ...] = ()

    def expert_rows(self, group: int) -> tuple[int, ...]:
        """Rows of every expert of a ``group``-expert launch."""
        return self.rows or (self.m,) * group


class Sample(Frozen):
    """One measured case. Collectives set ``nbytes`` (nccl-tests' size column semantics)."""

    op: str
    nbytes: float | None = Field(default=None, gt=0)
    attention: AttentionShape | None = None
    gemm: GemmShape | None = None
    group: int = Field(default=1, gt=0)
    gpus_per_node: int | None = Field(default=None, gt=0)
    time: TimeStats
    source: str = ""


class Piece(Frozen):
    """One regime of an alpha-beta curve, active from per-rank link bytes ``start``.

    ``T(V) = steps * alpha_step + V / (B * eff(V))``, ``eff(V) = eta / (1 + (half / V)**gamma)``.
    ``gamma <= 1`` keeps ``T`` non-decreasing in ``V``; ``eta <= 1`` keeps bus bandwidth at or
    below the link rate ``B``.
    """

    start: float = Field(ge=0)
    alpha_step: float = Field(ge=0)
    eta: float = Field(gt=0, le=1)
    half: float = Field(ge=0)
    gamma: float = Field(gt=0, le=1)


class Fit(Frozen):
    """Fitted parameters of one op on one group size and layout (and algorithm)."""

    op: str
    group: int = Field(default=1, gt=0)
    gpus_per_node: int | None = Field(default=None, gt=0)
    algorithm: str | None = None
    dtype: str | None = None
    model: Literal["alpha_beta", "flash_tiles", "gemm_roofline", "grouped_tiles"]
    pieces: tuple[Piece, ...] = ()
    params: dict[str, float] = Field(default_factory=dict)
    link_bw: float | None = Field(default=None, gt=0)
    n: int = Field(default=0, ge=0)
    size_min: float | None = None
    size_max: float | None = None
    fit_median_abs_pct_error: float | None = None
    cv_median_abs_pct_error: float | None = None
    cv_p90_abs_pct_error: float | None = None
    points: tuple[tuple[float, float], ...] = ()
    source: str = ""

    @model_validator(mode="after")
    def _has_curve(self) -> Fit:
        if self.model == "alpha_beta" and not self.pieces:
            raise InputError("pieces", "[]", "at least one piece for an alpha_beta fit")
        return self

    @property
    def scope(self) -> str:
        """``intra`` when the whole group sits in one node, else ``inter``."""
        gpn = self.gpus_per_node or self.group
        return "intra" if gpn >= self.group else "inter"

    def key(self) -> tuple[str, int, int, str, str]:
        return (
            self.op,
            self.group,
            self.gpus_per_node or 0,
            self.algorithm or "",
            self.dtype or "",
        )


class Interference(Frozen):
    """One kernel run while a collective is in flight on the same GPUs (calibration harness).

    ``kernel_s``: one kernel alone; ``kernel_under_s``: one kernel of a ``burst`` launched
    while the collective runs; ``collective_s``: the collective alone; ``both_s``: the wall
    time of the collective and the burst launched together (all medians of the slowest rank).
    """

    kernel: Literal["gemm"] = "gemm"
    m: int = Field(gt=0)
    n: int = Field(gt=0)
    k: int = Field(gt=0)
    dtype: str = "bf16"
    collective: str
    nbytes: float = Field(gt=0)
    group: int = Field(gt=0)
    burst: int = Field(gt=0)
    kernel_s: float = Field(gt=0)
    kernel_under_s: float = Field(gt=0)
    collective_s: float = Field(gt=0)
    both_s: float = Field(gt=0)
    source: str = ""

    @property
    def kernel_slowdown(self) -> float:
        """How much slower a kernel runs under the collective (1: unaffected)."""
        return self.kernel_under_s / self.kernel_s

    @property
    def overlap(self) -> float:
        """Share of the shorter of (burst, collective) hidden by running them together:
        1 when ``both = max``, 0 when ``both = sum`` (clipped to [0, 1])."""
        burst = self.kernel_s * self.burst
        hidden = burst + self.collective_s - self.both_s
        return min(max(hidden / min(burst, self.collective_s), 0.0), 1.0)


class HostCheck(Frozen):
    """One host stage run as its serving stack writes it (Python/torch on CPU tensors), its
    wall-clock median beside the price the per-call model gives from the same profile."""

    stage: str
    measured_s: float = Field(gt=0)
    modelled_s: float = Field(gt=0)


class HostOverheads(Frozen):
    """Per-call costs of the host (CPU) stages of MoE serving (``sim.moe.host``): one Python
    loop iteration, one torch op on a small CPU tensor (dispatch overhead), one element of a
    vectorised torch op, and, measured with a GPU only, a small device-host copy and the
    launch of a kernel after a synchronisation (absent: ``sim.moe.host``'s sourced defaults)."""

    cpu: str = Field(min_length=1)
    python_iteration_s: Sourced
    torch_op_s: Sourced
    element_op_s: Sourced
    copy_s: Sourced | None = None
    launch_s: Sourced | None = None
    checks: tuple[HostCheck, ...] = ()


class Profile(Frozen):
    """A device calibration profile (see the module docstring).

    ``gpu``: the device in the topology files' naming (``H200-SXM``, ``CPU``), ``gpu_count``:
    how many devices (GPUs, or gloo ranks on a CPU) the measurements used. A topology whose
    ``gpu`` is of another family refuses the profile unless the scenario says
    ``profile_scope: borrowed`` (:func:`check_device`).
    """

    schema_version: Literal[1] = 1
    name: str = "profile"
    device: str
    gpu: str | None = None
    gpu_count: int | None = Field(default=None, gt=0)
    interconnect: Interconnect
    software: dict[str, str] = Field(default_factory=dict)
    source: str
    date: str
    peaks: Peaks
    kernels: Kernels
    samples: tuple[Sample, ...] = ()
    fits: tuple[Fit, ...] = ()
    interference: tuple[Interference, ...] = ()
    #: Host-stage per-call costs (``libra-des calibrate``); None: the shipped defaults.
    host: HostOverheads | None = None

    def peak_flops(self, dtype: str = "bf16") -> float:
        """Dense peak FLOP/s for ``dtype`` (bf16, fp16, fp32, tf32, fp8)."""
        value = getattr(self.peaks, f"{dtype}_flops", None) if dtype in DTYPE_BYTES else None
        if value is None:
            have = [d for d in DTYPE_BYTES if getattr(self.peaks, f"{d}_flops", None)]
            raise InputError("dtype", dtype, " | ".join(have))
        return float(value.value)

    @property
    def hbm_bw(self) -> float:
        return float(self.peaks.hbm_bytes_per_s.value)

    def fits_for(self, op: str) -> list[Fit]:
        return [f for f in self.fits if f.op == op]

    def with_samples(self, samples: tuple[Sample, ...]) -> Profile:
        return self.model_copy(update={"samples": samples})

    def with_fits(self, fits: tuple[Fit, ...]) -> Profile:
        """Replace fits with the same key, keep the others (e.g. fits whose samples shipped
        stripped), sorted for stable files."""
        new = {f.key() for f in fits}
        kept = [f for f in self.fits if f.key() not in new]
        return self.model_copy(update={"fits": tuple(sorted([*kept, *fits], key=Fit.key))})


# ----------------------------------------------------------------------------- loading


def shipped_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.json"))


def resolve_profile(ref: str | Path) -> Path:
    """A path, or a shipped name (``h200-sxm`` -> ``calibration/profiles/h200-sxm.json``)."""
    path = Path(ref)
    if is_file(path):
        return path
    for cand in (PROFILE_DIR / f"{ref}.json", PROFILE_DIR / str(ref)):
        if is_file(cand):
            return cand
    names = ", ".join(shipped_profiles()) or "none shipped"
    raise InputError("profile", str(ref), f"an existing profile JSON file or one of: {names}")


def read_text(path: Path, field: str, what: str) -> str:
    """A file's text; a missing or unreadable file is an input error naming ``what``."""
    try:
        return read_bounded(path, field)
    except FileNotFoundError:
        raise InputError(field, str(path), f"an existing {what}") from None
    except (OSError, UnicodeDecodeError) as exc:
        kind = exc.__class__.__name__
        raise InputError(field, str(path), f"a readable {what} ({kind})") from None


def read_json(path: Path, field: str = "profile") -> Any:
    text = read_text(path, field, "JSON file")
    return parse_json(text, field, str(path))


def parse_profile(data: Any, where: str = "profile") -> Profile:
    """Validate a mapping into a :class:`Profile` with the one-line error contract."""
    if not isinstance(data, Mapping):
        raise InputError(where, type(data).__name__, "a JSON object")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise InputError(f"{where}.schema_version", version, str(SCHEMA_VERSION))
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        raise pydantic_line(exc, f"{where}.", model=Profile) from None


def load_profile(ref: str | Path | Mapping[str, Any] | Profile | None = None) -> Profile:
    """Load a profile: ``None`` -> the shipped H200 SXM profile; names resolve to
    ``calibration/profiles/<name>.json``; a mapping is validated as is."""
    if isinstance(ref, Profile):
        return ref
    if isinstance(ref, Mapping):
        return parse_profile(ref)
    path = resolve_profile(DEFAULT_PROFILE if ref is None else ref)
    return parse_profile(read_json(path), "profile")


def save_profile(profile: Profile, path: str | Path) -> Path:
    """Write ``profile`` as canonical JSON through a temporary file (atomic rename)."""
    out = Path(path)
    text = dumps(profile.model_dump(mode="json", exclude_none=True)) + "\n"
    try:
        write_atomic(out, text)
    except OSError as exc:
        kind = exc.__class__.__name__
        raise InputError("path", str(path), f"a writable path ({kind})") from None
    return out


_FAMILY = re.compile(r"(gb\d{3}|[abhlv]\d{2,3}s?|mi\d{3}x?|cpu)", re.IGNORECASE)


def gpu_family(name: str) -> str:
    """``H200-SXM``, ``NVIDIA H200 SXM`` -> ``h200``; ``CPU Intel ...`` -> ``cpu``; a name
    without a known model number is its own family (lower case, no spaces)."""
    found = _FAMILY.search(name)
    return found.group(1).lower() if found else name.lower().replace(" ", "")


def profile_gpu(profile: Profile) -> str:
    """The device the profile was measured on (``gpu``, else its ``device`` string)."""
    return profile.gpu or profile.device


def check_device(profile: Profile, topology_gpu: str, scope: str, ref: object) -> str | None:
    """None when ``profile`` was measured on the topology's GPU family; a warning when it was
    not but ``scope`` is ``borrowed``; otherwise an input error (one line)."""
    measured = profile_gpu(profile)
    if gpu_family(measured) == gpu_family(topology_gpu) or topology_gpu in ("", "gpu"):
        return None  # the same family, or a topology that does not name its GPU
    if scope == "borrowed":
        return (f"profile {ref} was measured on {measured}, the topology has {topology_gpu}: "
                "its numbers are borrowed (profile_scope: borrowed)")
    raise InputError("profile", f"{ref} (measured on {measured})",
                     f"a profile measured on {topology_gpu}, the topology's GPU, or "
                     "profile_scope: borrowed to use it anyway")


def datasheet_for(device: str) -> Profile:
    """The shipped datasheet profile whose device matches ``device`` (h200 / h100 / a100)."""
    low = device.lower().replace(" ", "")
    for name in shipped_profiles():
        if name.split("-")[0] in low:
            return load_profile(name)
    names = ", ".join(shipped_profiles())
    raise InputError("device", device, f"a device with a shipped datasheet profile ({names})")
