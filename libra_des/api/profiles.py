"""Calibration profiles: import measurements into one and fit it, refit, replay its samples
(``libra-des validate``), and the numbers ``profile show`` / ``compare`` print.

The fitting, the importers and the replay are :mod:`libra_des.hardware`'s; every function
imports them inside its body.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from libra_des.errors import InputError

if TYPE_CHECKING:
    from libra_des.hardware.profiles.fitting import FitResult as FitResult
    from libra_des.hardware.profiles.importers import Imported as Imported
    from libra_des.hardware.profiles.profile import Fit as Fit
    from libra_des.hardware.profiles.profile import Profile as Profile
    from libra_des.hardware.profiles.profile import Sourced as Sourced

__all__ = [
    "Prediction", "ProfileValidation", "SampleGroup", "import_formats", "import_measurements",
    "load_profile", "profile_predictions", "read_measurements", "refit_profile",
    "sample_groups", "validate_profile",
]

GIB, MIB = float(1 << 30), float(1 << 20)


def import_formats() -> tuple[str, ...]:
    """The measurement formats ``profile import --format`` reads."""
    from libra_des.hardware.profiles.importers import FORMATS

    return FORMATS


def load_profile(ref: str | Path | None = None) -> Profile:
    """A profile by path or shipped name (``None``: the shipped H200 SXM)."""
    from libra_des.hardware.profiles.profile import load_profile as load

    return load(ref)


def read_measurements(fmt: str, paths: list[Path]) -> Imported:
    """The samples of measurement files in format ``fmt`` (and the device they name)."""
    from libra_des.hardware.profiles.importers import import_files

    return import_files(fmt, paths)


def base_profile(out: Path, device: str | None, start_from: str | None = None) -> Profile:
    """The profile to extend: ``out`` if it exists, else ``start_from`` or the device's datasheet
    profile (without fits or samples)."""
    from libra_des.hardware.profiles.profile import datasheet_for
    from libra_des.hardware.profiles.profile import load_profile as load

    if out.exists():
        prof = load(out)
        return prof.model_copy(update={"device": device}) if device else prof
    if start_from is not None:
        start = load(start_from)
        return start.model_copy(update={"device": device or start.device, "name": out.stem,
                                        "gpu": device or start.gpu, "fits": (),
                                        "samples": (), "interference": ()})
    if device is None:
        raise InputError("--device", None, "a device name (the files do not name one)")
    base = datasheet_for(device)
    return base.model_copy(update={"device": device, "name": out.stem, "fits": ()})


def import_measurements(imported: Imported, out: Path, device: str | None = None,
                        start_from: str | None = None, cv: bool = False,
                        strip_samples: bool = False) -> list[FitResult]:
    """Add ``imported`` to the profile at ``out`` (a new one from ``start_from`` or the
    device's datasheet profile), fit it and save it; re-imported files replace their samples.
    ``strip_samples`` keeps the fits only."""
    from libra_des.hardware.profiles.fitting import fit_profile
    from libra_des.hardware.profiles.profile import save_profile

    prof = base_profile(out, device or (None if out.exists() else imported.device), start_from)
    fresh = {s.source for s in imported.samples}
    kept = tuple(s for s in prof.samples if s.source not in fresh)
    prof = prof.with_samples(kept + imported.samples)
    prof, results = fit_profile(prof, cv=cv)
    if strip_samples:
        prof = prof.with_samples(())
    save_profile(prof, out)
    return results


def refit_profile(ref: str, cv: bool = False) -> tuple[Path, list[FitResult]]:
    """Refit a profile's samples (``cv``: leave-one-size-out cross-validation) and save it
    when anything was fitted; (its path, the fits)."""
    from libra_des.hardware.profiles.fitting import fit_profile
    from libra_des.hardware.profiles.profile import resolve_profile, save_profile

    path = resolve_profile(ref)
    fitted, results = fit_profile(load_profile(path), cv=cv)
    if results:
        save_profile(fitted, path)
    return path, results


@dataclass(frozen=True)
class ProfileValidation:
    """A profile's samples replayed through the model of its own machine: one row per (op,
    group, layout, dtype) with n and the median / p90 / worst absolute % error."""

    device: str
    samples: int
    rows: list[dict[str, object]]


def validate_profile(ref: str | Path) -> ProfileValidation:
    """Replay every measured sample of a profile (``libra-des validate``)."""
    from libra_des.hardware.profiles.profile_replay import replay, summarise

    profile = load_profile(ref)
    rows = summarise(profile, replay(profile))
    return ProfileValidation(profile.device, len(profile.samples), rows)


@dataclass(frozen=True)
class SampleGroup:
    """The samples of one fit key: op, group, GPUs per node, count, size range, their files."""

    op: str
    group: int
    gpus_per_node: int
    count: int
    smallest: float
    largest: float
    files: tuple[str, ...]


def sample_groups(profile: Profile) -> list[SampleGroup]:
    """A profile's samples by fit key (ops without a fitted model are left out)."""
    from libra_des.hardware.profiles.fitting import group_samples, sample_size

    out = []
    for (op, group, gpn, _), ss in group_samples(profile.samples).items():
        sizes = [sample_size(s) for s in ss]
        files = Counter(s.source for s in ss)
        out.append(SampleGroup(op, group, gpn, len(ss), min(sizes), max(sizes),
                               tuple(sorted(files))))
    return out


@dataclass(frozen=True)
class Prediction:
    """One fixed question asked of a profile: what, in how many seconds, and how."""

    label: str
    seconds: float
    how: str


def profile_predictions(profile: Profile, nodes: int = 2) -> list[Prediction]:
    """A fixed set of collectives, attention calls and a GEMM priced by the profile on its own
    machine (``nodes`` nodes of its interconnect): what ``profile compare`` sets side by side."""
    from libra_des.hardware.costs import CostModel

    model = CostModel(profile, profile.interconnect.fabric(nodes=nodes))
    out: list[Prediction] = []
    for op, size, group, gpn in (
        ("all_reduce", 64 * MIB, 8, 8),
        ("all_reduce", 1 * GIB, 8, 8),
        ("all_gather", 64 * MIB, 8, 8),
        ("reduce_scatter", 64 * MIB, 8, 8),
        ("all_reduce", 1 * GIB, 16, 8),
        ("send_recv", 64 * MIB, 2, 2),
        ("send_recv", 64 * MIB, 2, 1),
    ):
        res = model.collective(op, size, group, gpn)
        out.append(Prediction(f"{op} {size / MIB:.0f} MiB on {group} ({gpn}/node)",
                              res.seconds, f"{res.algorithm}, busbw {res.busbw_gbs:.0f} GB/s"))
    for length in (1024, 8192, 32768):
        secs = model.attention_docs([length] * (32768 // length), 64, 8, 128)
        out.append(Prediction(f"attention fwd, 32K tokens in {length}-token docs, 64 heads",
                              secs, "-"))
    secs = float(model.gemm(4096, 4096, 4096))
    out.append(Prediction("gemm 4096^3 bf16", secs, f"{2 * 4096**3 / secs / 1e12:.0f} TFLOP/s"))
    return out
