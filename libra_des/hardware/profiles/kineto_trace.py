"""A PyTorch profiler (Kineto) trace parsed into typed models, every field checked.

The trace is Chrome's trace-event JSON as ``torch.profiler`` writes it. Each event is
validated on its own, so a bad one is reported as ``FILE: traceEvents[INDEX].FIELD`` (one
line, :class:`~libra_des.errors.InputError`). The rules (assumptions):

- an event is a JSON object whose ``ph`` (phase) is one of the Chrome trace-event format's
  phases (:data:`PHASES`); only complete events (``ph: X``) are read, every other phase is
  skipped by rule (metadata, instants, flows, counters carry no operator);
- a complete event's ``cat`` is one of the categories Kineto writes (:data:`CATEGORIES`,
  libkineto's ``ActivityType`` names plus the trace-wide span and the names of older
  versions); an unknown category is refused (a file from another tool, or edited);
- ``ts`` and ``dur`` are finite numbers of microseconds, ``ts >= 0``, ``0 <= dur <= 1 h``;
- the ``args`` Kineto writes and this reader uses have their types: ``External id`` a whole
  number, ``Input Dims`` lists of (lists of) sizes in ``0 .. 2**40``, ``Input type`` and
  ``Concrete Inputs`` lists, the NCCL kernel's ``Group size`` ``1 .. MAX_GPUS`` and message
  element counts ``0 .. 2**40``; other args are kept unread;
- ``deviceProperties`` is a list of objects with a ``name`` string; ``distributedInfo``'s
  ``world_size`` is ``1 .. MAX_GPUS``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from libra_des.config.validation import MAX_GPUS
from libra_des.errors import InputError

#: Chrome trace-event format phases (the "Trace Event Format" document's event types).
PHASES = frozenset("BEXiIMCbnestfPONDRcTpSF()")
#: Categories of complete events Kineto writes (libkineto ``ActivityType`` names, the
#: trace-wide ``Trace`` span, and the capitalised names of Kineto's first releases).
CATEGORIES = frozenset({
    "cpu_op", "user_annotation", "gpu_user_annotation", "gpu_memcpy", "gpu_memset", "kernel",
    "external_correlation", "cuda_runtime", "cuda_driver", "cpu_instant_event",
    "python_function", "overhead", "cuda_sync", "cuda_profiler_range", "mtia_runtime",
    "mtia_ccp_events", "mtia_insight", "glow_runtime", "hpu_op", "xpu_runtime", "xpu_driver",
    "collective_comm", "privateuse1_runtime", "privateuse1_driver", "gpu_mem", "ac2g",
    "fwdbwd", "trace", "operator", "runtime", "memcpy", "memset", "python", "user annotation",
})
#: Largest tensor dimension or message element count accepted (2**40, our bound: far above
#: any tensor a GPU holds).
MAX_SIZE = 1 << 40
#: Longest event accepted: one hour in microseconds (the importers' MAX_SECONDS).
MAX_DUR_US = 3600.0 * 1e6
#: Latest timestamp accepted, in microseconds (about 3,000 years since the epoch).
MAX_TS_US = 1e17
#: Most events one trace may hold (our bound; a day-long trace of a busy job holds fewer).
MAX_EVENTS = 50_000_000


class _Typed(BaseModel):
    """Strict types (no string numbers, no bool for int, no NaN); unknown keys kept."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False, frozen=True, extra="allow",
                              populate_by_name=True)


def _sizes(value: Any) -> Any:
    """Every whole number in a (nested) ``Input Dims`` entry lies in ``0 .. MAX_SIZE``."""
    if isinstance(value, list):
        for v in value:
            _sizes(v)
        return value
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SIZE:
        raise ValueError(f"tensor sizes: whole numbers in 0..{MAX_SIZE}")
    return value


class EventArgs(_Typed):
    """The ``args`` of one event that this reader uses (Kineto's spelling as aliases)."""

    external_id: int | None = Field(default=None, alias="External id", ge=0)
    input_dims: list[list[Any]] = Field(default_factory=list, alias="Input Dims")
    input_type: list[Any] = Field(default_factory=list, alias="Input type")
    concrete_inputs: list[Any] = Field(default_factory=list, alias="Concrete Inputs")
    collective_name: str | None = Field(default=None, alias="Collective name")
    in_nelems: int | None = Field(default=None, alias="In msg nelems", ge=0, le=MAX_SIZE)
    out_nelems: int | None = Field(default=None, alias="Out msg nelems", ge=0, le=MAX_SIZE)
    group_size: int | None = Field(default=None, alias="Group size", ge=1, le=MAX_GPUS)
    dtype: str | None = None

    @field_validator("input_dims")
    @classmethod
    def _dims(cls, value: list[list[Any]]) -> list[list[Any]]:
        _sizes(value)
        return value


class Event(_Typed):
    """One complete (``ph: X``) event; ``index``: its place in ``traceEvents``."""

    index: int = 0
    ph: str
    name: str
    cat: str
    ts: float = Field(ge=0, le=MAX_TS_US)
    dur: float = Field(ge=0, le=MAX_DUR_US)
    pid: int | str = 0
    tid: int | str = 0
    args: EventArgs = Field(default_factory=EventArgs)

    @field_validator("cat")
    @classmethod
    def _category(cls, value: str) -> str:
        if value.lower() not in CATEGORIES:
            raise ValueError("a Kineto event category (" + ", ".join(sorted(CATEGORIES)) + ")")
        return value.lower()


class DeviceProperty(_Typed):
    name: str = Field(min_length=1, max_length=200)


class DistributedInfo(_Typed):
    world_size: int = Field(default=1, ge=1, le=MAX_GPUS)


class Trace(_Typed):
    """The trace's header (events are validated one by one, :func:`parse_trace`)."""

    traceEvents: list[Any] = Field(max_length=MAX_EVENTS)  # Kineto's keys
    deviceProperties: list[DeviceProperty] = Field(default_factory=list)
    distributedInfo: DistributedInfo | None = None


def _line(exc: ValidationError, where: str) -> InputError:
    """The first pydantic error as the one-line contract, its path under ``where`` (a
    ``FILE: `` prefix or an event's ``FILE: traceEvents[i]``)."""
    err = exc.errors()[0]
    loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
    loc = loc.removeprefix(".") if where.endswith(" ") else loc
    value = err.get("input", "")
    shown = "{...}" if isinstance(value, Mapping) else value
    if err["type"] == "missing":
        shown = "nothing"
    return InputError(f"{where}{loc}", shown, str(err["msg"]).removeprefix("Value error, "))


def parse_event(raw: Any, index: int, where: str) -> Event | None:
    """Event ``index`` typed; None for a phase other than a complete event (skipped)."""
    at = f"{where}: traceEvents[{index}]"
    if not isinstance(raw, Mapping):
        raise InputError(at, raw, "a trace event (a JSON object)")
    ph = raw.get("ph")
    if not isinstance(ph, str) or ph not in PHASES:
        raise InputError(f"{at}.ph", ph, "a trace-event phase (" + " ".join(sorted(PHASES)) + ")")
    if ph != "X":
        return None
    try:
        return Event.model_validate({**raw, "index": index})
    except ValidationError as exc:
        raise _line(exc, at) from None


def parse_trace(data: Any, path: Path) -> tuple[Trace, list[Event]]:
    """The trace's header and its complete events, typed (module docstring's rules)."""
    where = str(path)
    if not isinstance(data, Mapping) or not isinstance(data.get("traceEvents"), list):
        raise InputError("FILE", where, "a PyTorch profiler trace (a traceEvents list)")
    keys = {k: data[k] for k in ("traceEvents", "deviceProperties", "distributedInfo")
            if k in data and data[k] is not None}
    try:
        trace = Trace.model_validate(keys)
    except ValidationError as exc:
        raise _line(exc, f"{where}: ") from None
    events = [parse_event(raw, i, where) for i, raw in enumerate(trace.traceEvents)]
    return trace, [e for e in events if e is not None]
