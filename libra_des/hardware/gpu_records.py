"""GPU records: every per-GPU fact the model reads, one YAML file per GPU type.

A record (:class:`GpuRecord`) names one GPU type and holds its facts: peak FLOP/s per dtype,
HBM size and bandwidth, SM count, NVLink generation and bandwidth, the generation NCCL's tuner
indexes its tables by, PCIe link and copy engines. Every fact is a :class:`Fact`: the value,
where it comes from (``source``: a datasheet, a measurement, or "our assumption") and its tier
(``datasheet`` / ``measured`` / ``assumption``).

Where records live: the shipped ones in ``libra_des/hardware/gpus/*.yaml`` (package data, so a
non-editable install has them), then every folder named in the environment variable
``LIBRA_DES_GPU_RECORDS`` (``os.pathsep``-separated, like ``PATH``): a user adds a GPU out of
tree by writing one YAML file in a folder of their own and naming that folder there. Shipped
and user records go through the same loader; a name (or alias) given twice is bad input.

How a GPU is named: exactly by a record's ``name`` or one of its ``aliases`` (the aliases carry
the spellings in use: a profile's ``device`` string, CUDA's device name). A topology's ``gpu``
that no record names is bad input naming the record folders (:func:`gpu_record`). A profile's
device that no record names (a CPU profile, a GPU without a record) is priced as
:data:`ASSUMED_DEVICE` (:func:`device_record`; our assumption: a Hopper SXM part).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Generic, Literal, TypeVar

from pydantic import Field, ValidationError, model_validator

from libra_des.base.identity import GPU_RECORDS_ENV
from libra_des.config import Frozen, pydantic_line
from libra_des.config.validation import read_bounded
from libra_des.config.yaml_text import parse_yaml
from libra_des.errors import InputError

#: The shipped records (package data, see ``pyproject.toml``).
GPU_DIR = Path(__file__).resolve().with_name("gpus")
#: Folders of user records, ``os.pathsep``-separated, read after the shipped ones (the code
#: fingerprint of sweep points hashes their files, ``base/identity.py``).
RECORDS_ENV = GPU_RECORDS_ENV
#: The record a profile device without one is priced as (our assumption: a Hopper SXM part,
#: the model's default device class).
ASSUMED_DEVICE = "H100-SXM"

Tier = Literal["datasheet", "measured", "assumption"]
NcclGeneration = Literal["volta", "ampere", "hopper", "blackwell"]
T = TypeVar("T", bound=int | float | str)


class Fact(Frozen, Generic[T]):
    """One fact of a GPU: its value, where it comes from, and that source's tier."""

    value: T
    tier: Tier
    source: str = Field(min_length=1)

    @model_validator(mode="after")
    def _positive(self) -> Fact[T]:
        if isinstance(self.value, int | float) and not self.value > 0:
            raise InputError("value", self.value, "> 0")
        return self


class GpuRecord(Frozen):
    """One GPU type. Rates are dense (no sparsity), per GPU; link bandwidths per direction.

    ``nvlink_*``: absent on a part without NVLink (PCIe-only boards; AMD's Infinity Fabric is
    not NVLink). ``fp8_flops`` / ``tf32_flops``: absent where the part has no such tensor
    path. ``nccl_generation``: the row NCCL's tuner reads for this part
    (``calibration/public/nccl_tuning.yaml``). ``copy_engines`` and ``pcie_*``: optional,
    where a source gives them.
    """

    name: str = Field(min_length=1)
    aliases: tuple[str, ...] = ()
    description: str = Field(min_length=1)
    sm_count: Fact[int]
    hbm_bytes: Fact[float]
    hbm_bytes_per_s: Fact[float]
    bf16_flops: Fact[float]
    fp16_flops: Fact[float]
    fp32_flops: Fact[float]
    tf32_flops: Fact[float] | None = None
    fp8_flops: Fact[float] | None = None
    nvlink_generation: Fact[int] | None = None
    nvlink_bytes_per_s: Fact[float] | None = None
    nccl_generation: Fact[NcclGeneration]
    copy_engines: Fact[int] | None = None
    pcie_generation: Fact[int] | None = None
    pcie_bytes_per_s: Fact[float] | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    def tiers(self) -> dict[str, str]:
        """Fact name -> tier, for every fact the record has."""
        return {name: fact.tier for name in type(self).model_fields
                if isinstance(fact := getattr(self, name), Fact)}


def record_folders() -> tuple[Path, ...]:
    """The shipped folder, then the user folders of :data:`RECORDS_ENV` (module docstring)."""
    extra = os.environ.get(RECORDS_ENV, "")
    return (GPU_DIR, *(Path(p) for p in extra.split(os.pathsep) if p))


def read_record(path: Path) -> GpuRecord:
    """One record file, validated (any problem: one line naming the file and the field)."""
    try:
        data = parse_yaml(read_bounded(path), str(path), str(path), ours=path.parent == GPU_DIR)
    except OSError as exc:
        raise InputError(str(path), exc.__class__.__name__, "a readable GPU record") from None
    try:
        return GpuRecord.model_validate(data)
    except ValidationError as exc:
        raise pydantic_line(exc, f"{path}: ", model=GpuRecord) from None


@lru_cache(maxsize=8)
def load_records(folders: tuple[Path, ...]) -> dict[str, GpuRecord]:
    """Every record of ``folders`` by each of its names (cached per folder list)."""
    found: dict[str, GpuRecord] = {}
    origin: dict[str, Path] = {}
    for folder in folders:
        if not folder.is_dir():
            raise InputError(RECORDS_ENV, str(folder), "folders of GPU record files (*.yaml)")
        for path in sorted(folder.glob("*.yaml")):
            record = read_record(path)
            for name in record.names:
                if name in found:
                    raise InputError(f"{path}: name", name,
                                     f"a GPU name not already given by {origin[name]}")
                found[name], origin[name] = record, path
    return found


def records() -> dict[str, GpuRecord]:
    """The records of :func:`record_folders`, by name and alias."""
    return load_records(record_folders())


def gpu_record(name: str, field: str = "topology.gpu") -> GpuRecord:
    """The record named ``name`` (exactly: a record's name or alias); one line otherwise."""
    known = records()
    if name in known:
        return known[name]
    shown = sorted({r.name for r in known.values()})
    folders = ", ".join(str(f) for f in record_folders())
    raise InputError(field, name, f"a GPU with a record in {folders} ({', '.join(shown)}); "
                     f"add one there or in a folder named by {RECORDS_ENV}")


def device_record(device: str) -> GpuRecord:
    """The record of a profile's device, :data:`ASSUMED_DEVICE`'s when none names it."""
    known = records()
    return known.get(device) or known[ASSUMED_DEVICE]
