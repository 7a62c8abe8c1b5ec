"""The validation layer: everything that rejects bad input before any work starts.

One place for the rules every command shares, so that each failure is one line
(``error: FIELD: got VALUE; allowed: ...``, exit status 2) raised *before* a simulation,
a fit or a file write begins:

* **strict reading** (the YAML loaders: :mod:`libra_des.config.yaml_text`): YAML and JSON
  with duplicate keys, non-finite numbers (``.inf``, ``.nan``, ``Infinity``, ``1e999``),
  nesting deeper than :data:`MAX_DEPTH` or more than :data:`MAX_VALUES` values (alias
  bombs) are rejected. YAML numbers follow YAML 1.2 (``1e12`` and ``1e-3`` are numbers, as
  a reader expects, not strings);
* **strict types** (:func:`strict_fields`, a hook of every configuration model): no
  ``true`` where a number goes, no quoted ``"1"`` where an integer goes, no ``1`` where a
  switch goes;
* **sane upper bounds** (:data:`LIMITS`): each says why it exists;
* **cross-field rules** of a whole scenario (:func:`check_model`, :func:`check_training`,
  :func:`check_gpus`), called by the scenario models of :mod:`libra_des.config` (a knob of
  the other scenario kind is an unknown key there: each kind's model has only its own).

The preflight estimate of a run's memory and time lives in :mod:`libra_des.kinds.preflight`; output
paths are checked by :func:`check_output_dir` (the policy: :mod:`libra_des.base.ownership`).
This module imports only that and :mod:`libra_des.errors`, so the configuration can call it.
"""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from libra_des.base.ownership import ALLOWED_FOLDER, check_file, check_folder, check_special
from libra_des.errors import InputError

#: Deepest nesting of mappings and lists accepted in any input file (scenarios nest about 4
#: deep, profiles 5): our choice, far above real files and far below Python's recursion limit.
MAX_DEPTH = 32
#: Most values (scalars, lists, mappings) in one input document: our choice; the largest
#: shipped file (a profile with samples) holds about 20,000.
MAX_VALUES = 1_000_000


# ----------------------------------------------------------------------------- reading


def parse_json(text: str, field: str, where: str) -> Any:
    """Parse JSON strictly: no ``NaN``/``Infinity``, no duplicate keys, bounded nesting."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise InputError(field, where, f"each key once (duplicate {key!r})")
            out[key] = value
        return out

    def constant(name: str) -> Any:
        raise InputError(field, where, f"finite numbers only (found {name})")

    try:
        data = json.loads(text, object_pairs_hook=pairs, parse_constant=constant)
    except RecursionError:
        raise InputError(field, where, f"nesting at most {MAX_DEPTH} levels deep") from None
    except json.JSONDecodeError as exc:
        raise InputError(field, where, f"well-formed JSON (line {exc.lineno})") from None
    check_tree(data, field)
    return data


def check_tree(data: Any, field: str) -> None:
    """Finite numbers, bounded depth and size anywhere in a parsed document."""
    count = 0
    stack: list[tuple[Any, str, int]] = [(data, field, 0)]
    while stack:
        node, where, depth = stack.pop()
        count += 1
        if count > MAX_VALUES:
            raise InputError(field, f"more than {MAX_VALUES} values", "a smaller document")
        if depth > MAX_DEPTH:
            raise InputError(where, "...", f"nesting at most {MAX_DEPTH} levels deep")
        if isinstance(node, float) and not math.isfinite(node):
            raise InputError(where, node, "a finite number")
        if isinstance(node, Mapping):
            stack.extend((v, f"{where}.{k}", depth + 1) for k, v in node.items())
        elif isinstance(node, list | tuple):
            stack.extend((v, f"{where}[{i}]", depth + 1) for i, v in enumerate(node))


# ----------------------------------------------------------------------------- types


def _kinds(annotation: Any) -> set[type]:
    """The scalar types a field annotation allows (``int | None`` -> {int})."""
    origin = get_origin(annotation)
    if origin is Union or (origin is not None and str(origin) == "<class 'types.UnionType'>"):
        return {t for arg in get_args(annotation) for t in _kinds(arg)}
    if origin is Literal:
        return {type(a) for a in get_args(annotation)}
    return {annotation} if isinstance(annotation, type) else {object}


def _converted(metadata: list[Any]) -> bool:
    """A field with its own before-validator (``'450GB/s'`` -> number) takes strings."""
    return any(type(m).__name__ in ("BeforeValidator", "PlainValidator") for m in metadata)


def type_problem(kinds: set[type], value: Any) -> str | None:
    """What is wrong with ``value`` for a field of ``kinds``, or None."""
    if value is None or object in kinds:
        return None
    numeric = kinds & {int, float}
    if isinstance(value, bool):
        if bool in kinds:
            return None
        return "a number (not true/false)" if numeric else None
    if bool in kinds and not (kinds - {bool, type(None)}):
        return "true or false"
    if isinstance(value, str) and numeric and str not in kinds:
        return "a number (not a quoted string)"
    if isinstance(value, float) and not math.isfinite(value) and numeric:
        return "a finite number"
    if isinstance(value, float) and kinds & {int, float} == {int} and not value.is_integer():
        return "an integer"
    return None


def strict_fields(fields: Mapping[str, Any], data: Any) -> None:
    """Before-validation hook: reject type coercions pydantic's lax mode would allow."""
    if not isinstance(data, Mapping):
        return
    for name, value in data.items():
        info = fields.get(name)
        if info is None:
            continue
        if _converted(list(info.metadata)):
            if isinstance(value, float) and not math.isfinite(value):
                raise InputError(str(name), value, "a finite number")
            continue
        problem = type_problem(_kinds(info.annotation), value)
        if problem:
            raise InputError(str(name), value, problem)
        if isinstance(value, Mapping | list) and get_origin(info.annotation) is dict:
            check_tree(value, str(name))


def models_in(annotation: Any) -> list[type]:
    """The configuration models an annotation holds (``Spec | None``, ``dict[str, Spec]``)."""
    if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
        return [annotation]
    return [m for arg in get_args(annotation) for m in models_in(arg)]


def fields_at(model: type, loc: tuple[Any, ...]) -> list[str]:
    """The field names of the model(s) at ``loc`` inside ``model`` (a pydantic error's
    location less its last part); parts that name no field (list indices, union tags) are
    stepped over."""
    current = [model]
    for part in loc:
        inner = [m for c in current if isinstance(part, str) and part in fields_of(c)
                 for m in models_in(fields_of(c)[part].annotation)]
        current = inner or current
    return sorted({name for c in current for name in fields_of(c)})


def fields_of(model: Any) -> dict[str, Any]:
    """A pydantic model class's fields (none for any other class)."""
    return dict(getattr(model, "model_fields", {}))


def did_you_mean(name: str, allowed: list[str]) -> str:
    """``; did you mean 'tp'?`` (difflib's closest allowed names), else the allowed names."""
    import difflib

    close = difflib.get_close_matches(name, allowed, n=3, cutoff=0.6)
    if close:
        return "; did you mean " + " or ".join(repr(c) for c in close) + "?"
    return f"; keys here: {' | '.join(allowed)}" if allowed else ""


# ----------------------------------------------------------------------------- bounds

#: Largest cluster the simulator accepts. The shipped scale scenario is 16,384 GPUs; building
#: the topology graph grows linearly and takes minutes beyond about 10^5 GPUs (measured on a
#: laptop-class core), so 131,072 (2^17) is the ceiling: our choice.
MAX_GPUS = 131_072
#: Longest sequence (tokens): 16M, sixteen times the paper's 1M corpus (our choice).
MAX_TOKENS = 1 << 24

#: Largest seed (numpy seeds take any integer; a signed 64-bit one is what every file and
#: command accepts).
MAX_SEED = 2**63 - 1

#: Per-class upper bounds: field -> (maximum, why). Checked after type validation.
LIMITS: dict[str, dict[str, tuple[float, str]]] = {
    "ScenarioBase": {"seed": (MAX_SEED, "a 64-bit seed")},
    "TrainingScenario": {"steps": (10_000, "steps per run; use a sweep for more")},
    "TrainingParallelism": {
        "dp": (MAX_GPUS, "GPUs of the largest supported cluster"),
        "pp": (1024, "pipeline stages"),
        "cp": (4096, "context-parallel workers per sequence"),
        "tp": (1024, "tensor-parallel ranks"),
        "gbs": (1 << 20, "packed sequences per step"),
        "virtual_stages": (64, "virtual stages per device"),
    },
    "MoeParallelism": {
        "ep": (MAX_GPUS, "GPUs of the largest supported cluster"),
        "tp": (1024, "tensor-parallel ranks"),
    },
    "ModelSpec": {
        "layers": (1024, "layers (the largest public models have < 200)"),
        "hidden": (1 << 18, "hidden size"),
        "heads_q": (4096, "attention heads"),
        "heads_kv": (4096, "attention heads"),
        "head_dim": (4096, "head dimension"),
        "ffn": (1 << 20, "FFN size"),
        "experts": (65_536, "routed experts"),
        "top_k": (1024, "experts per token"),
        "expert_ffn": (1 << 20, "expert FFN size"),
        "shared_experts": (1024, "shared experts"),
        "dense_layers": (1024, "layers"),
        "vocab": (1 << 24, "vocabulary size"),
        "dtype_bytes": (8, "bytes per element (fp64 at most)"),
    },
    "TrainingWorkload": {"packed_length": (MAX_TOKENS, "tokens per packed sequence")},
    "MoeWorkload": {
        "batch": (1 << 16, "requests per prefill batch"),
        "seq_len": (MAX_TOKENS, "tokens per request"),
        "batches": (100_000, "prefill batches"),
    },
    "LengthDist": {
        "median": (MAX_TOKENS, "tokens per sample"),
        "p99": (MAX_TOKENS, "tokens per sample"),
        "max": (MAX_TOKENS, "tokens per sample"),
        "min": (MAX_TOKENS, "tokens per sample"),
        "value": (MAX_TOKENS, "tokens per sample"),
        "sigma": (10.0, "a lognormal shape (10 spans 10^9 from p1 to p99)"),
        "tail_alpha": (100.0, "a Pareto index"),
        "tail_start": (MAX_TOKENS, "tokens per sample"),
    },
    "MixtureComponent": {"weight": (1e9, "a relative weight")},
    "RoutingSpec": {
        "skew": (100.0, "a logit scale"),
        "sharpness": (100.0, "a logit scale"),
        "profile_requests": (65_536, "requests in the profiling sample"),
    },
    "TrainingBalancerSpec": {
        "pool_size": (MAX_GPUS, "replicas per pool"),
        "heads_split": (4096, "attention heads"),
        "block_size": (MAX_TOKENS, "tokens per block"),
        "slack": (1.0, "a relative tolerance"),
        "chunks": (1024, "Pipeliner chunks"),
    },
    "MoeBalancerSpec": {
        "slots": (1024, "extra expert slots per GPU"),
        "redundant_experts": (65_536, "experts"),
        "shard_tolerance": (1.0, "a relative tolerance"),
    },
    "VarianceSpec": {
        "noise_sigma": (1.0, "a lognormal sigma; 1 already spreads op times over 10x"),
        **{f"{k}_factor": (100.0, "a slow-down factor")
           for k in ("slow", "failslow", "node_episode", "rack_episode", "link_episode")},
        **{f"{k}_steps": (1e6, "steps")
           for k in ("failslow", "node_episode", "rack_episode", "link_episode")},
        "degraded_link_factor": (1000.0, "a slow-down factor"),
        "rack_nodes": (MAX_GPUS, "nodes per rack"),
    },
    "TopologySpec": {
        "nodes": (MAX_GPUS, "nodes of the largest supported cluster"),
        "gpus_per_node": (1024, "GPUs per node"),
    },
    "LinkSpec": {
        "bandwidth": (1e15, "bytes/s per link (1 PB/s)"),
        "latency": (1.0, "seconds per hop"),
    },
    "PcieSpec": {"switches": (1024, "PCIe switches per node")},
    "NicSpec": {"count": (1024, "NICs per node")},
    "TwoLevelTopologySpec": {
        "nodes": (MAX_GPUS, "nodes of the largest supported cluster"),
        "gpus_per_node": (1024, "GPUs per node"),
    },
    "DomainLevel": {"nics": (1024, "NICs per node")},
    "PcieLevel": {"switches": (1024, "PCIe switches per node")},
    "NetworkLevel": {
        "fan_out": (MAX_GPUS, "units of the level below"),
        "oversubscription": (1024.0, "an oversubscription ratio"),
        "latency": (1.0, "seconds per hop"),
    },
    "NVSwitchLevel": {"bandwidth": (1e15, "bytes/s per link (1 PB/s)"), "latency": (1.0, "s")},
    "LeafLevel": {"bandwidth": (1e15, "bytes/s per link (1 PB/s)")},
    "SwitchLevel": {"bandwidth": (1e15, "bytes/s per link (1 PB/s)"),
                    "count": (65_536, "switches per unit")},
    "NetworkSpec": {
        "nodes_per_leaf": (MAX_GPUS, "nodes per leaf switch"),
        "spines": (65_536, "spine switches"),
        "oversubscription": (1024.0, "an oversubscription ratio"),
        "bandwidth": (1e15, "bytes/s per link (1 PB/s)"),
        "latency": (1.0, "seconds per hop"),
    },
    "Sample": {
        "nbytes": (float(1 << 40), "bytes (1 TiB)"),
        "group": (MAX_GPUS, "GPUs of the largest supported cluster"),
        "gpus_per_node": (1024, "GPUs per node"),
    },
    "Fit": {
        "group": (MAX_GPUS, "GPUs of the largest supported cluster"),
        "gpus_per_node": (1024, "GPUs per node"),
    },
    "TimeStats": {name: (3600.0, "seconds (one hour)") for name in
                  ("median", "mean", "min", "max", "std")},
    "AttentionShape": {
        "heads_q": (4096, "attention heads"),
        "heads_kv": (4096, "attention heads"),
        "head_dim": (4096, "head dimension"),
        "cp": (4096, "context-parallel workers"),
    },
    "GemmShape": {"m": (1 << 24, "rows"), "n": (1 << 24, "columns"), "k": (1 << 24, "depth")},
}
#: Products of fields with a joint bound: class -> (fields, maximum, what).
PRODUCTS = {
    name: (("nodes", "gpus_per_node"), MAX_GPUS, "GPUs in the topology")
    for name in ("TopologySpec", "TwoLevelTopologySpec")
}


def check_limits(obj: Any) -> None:
    """After-validation hook: finite floats (also those converted from text such as
    ``'1e999GB/s'``) and every bounded field of ``obj`` within its :data:`LIMITS`."""
    for name in type(obj).model_fields:
        value = getattr(obj, name, None)
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(name, value, "a finite number")
    names = [cls.__name__ for cls in type(obj).__mro__]
    for name, (hi, why) in ((k, v) for n in names for k, v in LIMITS.get(n, {}).items()):
        value = getattr(obj, name, None)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > hi:
            shown = f"{hi:,}" if isinstance(hi, int) else f"{hi:g}"
            raise InputError(name, value, f"<= {shown} ({why})")
    if type(obj).__name__ in PRODUCTS:
        fields, top, what = PRODUCTS[type(obj).__name__]
        total = math.prod(getattr(obj, f) for f in fields)
        if total > top:
            raise InputError(" x ".join(fields), total, f"<= {top:,} {what}")


# ----------------------------------------------------------------------------- scenarios

def check_model(m: Any) -> None:
    """Cross-field rules of a model shape that its own fields cannot say alone."""
    if m.dense_layers > m.layers or (m.is_moe and m.dense_layers >= m.layers):
        limit = "< layers" if m.is_moe else "<= layers"
        raise InputError("model.dense_layers", m.dense_layers, f"{limit}={m.layers}")
    if m.heads_kv > m.heads_q:
        raise InputError("model.heads_kv", m.heads_kv, f"<= heads_q={m.heads_q}")


def check_gpus(gpus: int) -> None:
    """A scenario's layout fits the largest supported cluster."""
    if gpus > MAX_GPUS:
        raise InputError("parallelism", f"{gpus} GPUs", f"<= {MAX_GPUS:,} GPUs in all")


def check_training(sc: Any) -> None:
    m, par, w = sc.model, sc.parallelism, sc.workload
    stages = par.pp * par.virtual_stages
    if stages > m.layers:
        raise InputError("parallelism.pp", par.pp,
                         f"pp x virtual_stages <= model.layers={m.layers} (a layer per stage)")
    lengths = w.lengths
    step_tokens = par.gbs * w.packed_length
    for dist in (lengths, *(c.dist for c in getattr(lengths, "components", ()))):
        check_lengths(dist)
        # Every sample at least this long: beyond one step's tokens no step could hold one.
        least = max(dist.min, dist.value or 0) if dist is not None else 0
        if least > step_tokens:
            raise InputError("workload.lengths.value" if dist.value else "workload.lengths.min",
                             least, f"<= gbs x packed_length = {step_tokens:,} tokens (one "
                             "step's tokens; a longer sample fits in no step)")


def check_lengths(dist: Any) -> None:
    """Length-distribution rules: max >= min, p99 >= median, value within [min, max]."""
    if dist is None:
        return
    where = "workload.lengths"
    if dist.max is not None and dist.max < dist.min:
        raise InputError(f"{where}.max", dist.max, f">= lengths.min={dist.min}")
    if dist.median is not None and dist.p99 is not None and dist.p99 < dist.median:
        raise InputError(f"{where}.p99", dist.p99, f">= lengths.median={dist.median:g}")
    for c in dist.components:
        check_lengths(c.dist)


# ----------------------------------------------------------------------------- paths


#: Free disk space an output folder needs before a run starts: 16 MB, several result files
#: (a trace is bounded separately by the preflight); our choice.
MIN_FREE_BYTES = 16 << 20


def name_max(folder: Path) -> int:
    """Longest file name the file system of ``folder`` allows (255 if it cannot say)."""
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def check_output_dir(out: Path, flag: str, files: tuple[str, ...] = (),
                     patterns: tuple[str, ...] = (), owned: bool = True) -> None:
    """Refuse an output folder that cannot be written before any work starts.

    ``out`` must be a folder or creatable; the first existing ancestor must be a writable
    folder; no part may exceed the name length; ``out``, ``files`` and ``patterns`` in it the
    tool's to fill (:func:`~libra_des.base.ownership.check_folder`; not if ``owned=False``).
    """
    where = str(out)
    if len(os.fsencode(where)) >= 4096:
        raise InputError(flag, where, "a path shorter than 4,096 bytes")
    try:
        check_special(out, flag)  # a link loop anywhere on the path: ELOOP here
        dangling = next((p for p in (out, *out.parents) if p.is_symlink() and not p.exists()),
                        None)
        if dangling is not None:
            raise InputError(flag, where, f"a folder or a new path ({dangling} is a symbolic "
                             "link to a missing target)")
        probe = out.absolute()
        while not probe.exists():
            probe = probe.parent
        limit = name_max(probe)
        for part in out.parts:
            if len(os.fsencode(part)) > limit:
                raise InputError(flag, where, f"file names of at most {limit} bytes")
        if out.exists() and not out.is_dir():
            raise InputError(flag, f"{where} (a file)", ALLOWED_FOLDER)
        if not probe.is_dir():
            raise InputError(flag, where, f"a path inside a folder ({probe} is a file)")
        if not os.access(probe, os.W_OK | os.X_OK):
            raise InputError(flag, where, f"a writable folder ({probe} is read-only)")
        if shutil.disk_usage(probe).free < MIN_FREE_BYTES:
            raise InputError(flag, where, f"a folder on a disk with at least "
                             f"{MIN_FREE_BYTES >> 20} MB free")
        if owned:
            check_folder(out, flag, files, patterns)
    except OSError as exc:
        why = errno.errorcode.get(exc.errno or 0, type(exc).__name__)
        raise InputError(flag, where, f"a usable output path ({why})") from None


def check_output_file(path: Path, flag: str) -> None:
    """Refuse an output file path that cannot be written (see :func:`check_output_dir`)."""
    check_output_dir(path.parent, flag, owned=False)
    if len(os.fsencode(path.name)) > name_max(path.parent if path.parent.is_dir() else Path(".")):
        raise InputError(flag, str(path), "a file name the file system allows (too long)")
    if path.is_dir():
        raise InputError(flag, str(path), "a file path (this is a folder)")
    check_file(path, flag)


#: Largest input text file read (scenarios, topologies, profiles, measurement logs): 256 MB,
#: far above any real one; guards against /dev/zero and runaway files (our choice).
MAX_INPUT_BYTES = 256 << 20


def read_bounded(path: Path, field: str = "input") -> str:
    """A text file's content, refusing more than :data:`MAX_INPUT_BYTES`; FIFOs, sockets,
    devices and link loops unopened (``check_special``). OSError/UnicodeDecodeError pass on."""
    check_special(path, field)
    with path.open("rb") as fh:
        data = fh.read(MAX_INPUT_BYTES + 1)
    if len(data) > MAX_INPUT_BYTES:
        raise InputError(str(path), f"more than {MAX_INPUT_BYTES >> 20} MB",
                         f"an input file of at most {MAX_INPUT_BYTES >> 20} MB")
    return data.decode()


def is_file(path: Path) -> bool:
    """``Path.is_file`` that says False (instead of raising) for names the OS refuses."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False
