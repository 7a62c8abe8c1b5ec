"""Scenario description: YAML in, frozen validated objects out.

A scenario is one YAML file whose ``model``, ``workload``, ``topology`` and ``profile`` may be
paths to other YAML/JSON files. Loading is three steps, in the desmod spirit of
describe -> elaborate -> run:

1. read the YAML (and the files it names) into one plain mapping;
2. apply ``--set dotted.key=value`` overrides to that mapping;
3. validate it with pydantic into frozen objects, including cross-field rules
   (P | DP, DP | GBS, H | heads_q, M | heads_q/H, ...).

Any failure becomes :class:`~libra_des.errors.InputError` (one line, exit status 2).

This module holds the loading steps and the models ``libra-des plan`` validates on their own
(model shape, workload); the whole-scenario models and ``load_scenario`` are in
:mod:`libra_des.config.scenario`, importable from here too, imported on first use.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from libra_des.config.validation import (
    check_limits,
    did_you_mean,
    fields_at,
    is_file,
    read_bounded,
    strict_fields,
)
from libra_des.config.yaml_text import parse_value, parse_yaml
from libra_des.errors import InputError

#: Repository root: shipped topologies, workloads and profiles are found relative to it.
ROOT = Path(__file__).resolve().parents[2]


class Frozen(BaseModel):
    """Base for every configuration object: immutable, unknown keys rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _strict_input(cls, data: Any) -> Any:
        # No bool-as-int, string-as-number or non-finite values (libra_des.config.validation).
        strict_fields(cls.model_fields, data)
        return data

    @model_validator(mode="after")
    def _upper_bounds(self) -> Frozen:
        check_limits(self)
        return self


class ModelSpec(Frozen):
    """Transformer shape. Dense models set ``ffn``; MoE models set ``experts`` and friends."""

    name: str = "model"
    layers: int = Field(gt=0)
    hidden: int = Field(gt=0)
    heads_q: int = Field(gt=0)
    heads_kv: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    ffn: int | None = Field(default=None, gt=0)
    experts: int = Field(default=0, ge=0)
    top_k: int = Field(default=0, ge=0)
    expert_ffn: int | None = Field(default=None, gt=0)
    shared_experts: int = Field(default=0, ge=0)
    dense_layers: int = Field(default=0, ge=0)
    vocab: int = Field(default=151_936, gt=0)
    dtype_bytes: int = Field(default=2, gt=0)
    source: str | None = None

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        if self.heads_q % self.heads_kv:
            raise InputError("heads_kv", self.heads_kv, f"a divisor of heads_q={self.heads_q}")
        if self.experts and not self.top_k:
            raise InputError("top_k", self.top_k, "> 0 when experts > 0")
        if self.top_k > self.experts:
            raise InputError("top_k", self.top_k, f"<= experts={self.experts}")
        if not self.experts and self.ffn is None:
            raise InputError("ffn", None, "> 0 for a dense model (or set experts)")
        return self

    @property
    def is_moe(self) -> bool:
        return self.experts > 0


class LengthDist(Frozen):
    """A sample-length distribution (tokens per raw sample).

    ``lognormal_pareto``: lognormal body fitted to (median, p99) with an optional hard ``max``;
    ``empirical``: lengths read from ``path`` (JSON list, text, .npy);
    ``constant``: every sample is ``value`` tokens (defaults to ``median``);
    ``mixture``: weighted ``components``;
    ``quantile``: a corpus's quantile function, log-linear between ``knots``
    (``[[probability, length], ...]`` from 0 to 1; :mod:`libra_des.workload.quantile_law`).
    """

    #: A law registered in ``workload/lengths.py`` (which checks the fields it needs).
    kind: str = "lognormal_pareto"
    median: float | None = Field(default=None, gt=0)
    p99: float | None = Field(default=None, gt=0)
    max: int | None = Field(default=None, gt=0)
    min: int = Field(default=1, gt=0)
    sigma: float | None = Field(default=None, gt=0)
    tail_alpha: float | None = Field(default=None, gt=0)
    tail_start: float | None = Field(default=None, gt=0)
    tail_weight: float | None = Field(default=None, ge=0, le=1)
    value: int | None = Field(default=None, gt=0)
    path: str | None = None
    components: tuple[MixtureComponent, ...] = ()
    knots: tuple[tuple[float, float], ...] = ()


class MixtureComponent(Frozen):
    weight: float = Field(gt=0)
    dist: LengthDist


#: Named MoE routing profiles (docs/model.md B), plus ``mixed`` (a stream whose mix drifts).
MOE_DATASETS = (
    "bookcorpus",
    "codeforces",
    "deepseek-prover",
    "fineweb",
    "gsm8k",
    "hellaswag",
    "humanevalplus",
    "lmsys-chat-1m",
)


class RoutingSpec(Frozen):
    """MoE routing-trace generator settings (see ``libra_des.workload.routing``).

    ``skew`` scales expert-popularity logits (0: uniform; 1: paper-like 1.5-2.7 GPU imbalance);
    ``layer_correlation`` is the AR(1) coefficient of each token's latent state between
    adjacent layers; ``request_share`` the part of that state shared by a request's tokens;
    ``sharpness`` how strongly the latent state (vs. popularity) decides the experts;
    ``trace`` a ``.npz`` file of real routed experts that replaces the generator;
    ``profile_requests`` the size of the profiling sample EPLB and Lina learn from.
    """

    dataset: str = "mixed"
    skew: float = Field(default=1.0, ge=0)
    layer_correlation: float = Field(default=0.8, ge=0, le=1)
    request_share: float = Field(default=0.5, ge=0, le=1)
    sharpness: float = Field(default=1.5, ge=0)
    trace: str | None = None
    profile_requests: int = Field(default=32, gt=0)

    @model_validator(mode="after")
    def _check(self) -> RoutingSpec:
        if self.dataset.lower() not in (*MOE_DATASETS, "mixed"):
            raise InputError("dataset", self.dataset, " | ".join((*MOE_DATASETS, "mixed")))
        return self


class WorkloadBase(Frozen):
    """What both kinds' workloads name: a label, the routing model, the source."""

    name: str = "workload"
    routing: RoutingSpec | None = None
    source: str | None = None


class TrainingWorkload(WorkloadBase):
    """Training corpora: raw sample ``lengths`` packed into sequences of ``packed_length``."""

    packed_length: int = Field(default=262_144, gt=0)
    lengths: LengthDist | None = None
    # Training MoE layers: expert loads from the routing model (``routing`` or its defaults),
    # so the slowest EP rank sets each layer's time; false runs perfectly balanced experts.
    expert_skew: bool = True


class MoeWorkload(WorkloadBase):
    """MoE prefill: ``batches`` batches of ``batch`` requests of ``seq_len`` tokens."""

    batch: int = Field(default=32, gt=0)
    seq_len: int = Field(default=1024, gt=0)
    batches: int = Field(default=4, gt=0)


#: The training workload (what ``libra-des plan --workload`` reads), under its former name.
WorkloadSpec = TrainingWorkload


# ----------------------------------------------------------------------------- loading


def read_yaml(path: str | Path, field: str = "scenario") -> Any:
    """Read one YAML file; missing, unreadable or malformed files are input errors."""
    p = Path(path)
    try:
        text = read_bounded(p, field)
    except FileNotFoundError:
        raise InputError(field, str(path), "an existing YAML file") from None
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.__class__.__name__
        raise InputError(field, str(path), f"a readable YAML file ({why})") from None
    return parse_yaml(text, field, str(path))


def resolve_path(ref: str, base: Path, folder: str, suffixes: Iterable[str]) -> Path | None:
    """Find ``ref`` relative to ``base``, the cwd, then the shipped ``ROOT/folder``."""
    candidates = [base / ref, Path(ref), ROOT / ref, ROOT / folder / ref]
    candidates += [ROOT / folder / f"{ref}{s}" for s in suffixes]
    for cand in candidates:
        if is_file(cand):
            return cand
    return None


def shipped_names(folder: str) -> list[str]:
    """The names of the YAML files shipped in ``ROOT/folder`` (their stems, sorted)."""
    return sorted(p.stem for p in (ROOT / folder).glob("*.yaml"))


def not_found(field: str, ref: str, folder: str, what: str) -> InputError:
    """The error for a name or path that is nowhere: the closest shipped names, if any."""
    import difflib  # lazy: only on this error

    names = shipped_names(folder)
    close = difflib.get_close_matches(Path(ref).stem, names, n=3, cutoff=0.6)
    hint = (f"; did you mean {' or '.join(repr(c) for c in close)}?" if close
            else f"; shipped: {', '.join(names)}" if len(names) <= 12 else "")
    return InputError(field, ref, f"{what} (looked in ., {folder}/){hint}")


def shipped_scenario(ref: str | Path) -> Path:
    """A scenario file: ``ref`` itself if it is a file, else the shipped scenario of that
    name (``quickstart`` -> ``ROOT/scenarios/quickstart.yaml``), so shipped scenarios run by
    name from any folder; neither is one line naming the closest shipped names."""
    path = Path(ref)
    if is_file(path) or path.exists():
        return path  # a file, or a path read_yaml will name what is wrong with
    if path.parent == Path("."):
        for suffix in ("", ".yaml", ".yml"):
            shipped = ROOT / "scenarios" / f"{path.name}{suffix}"
            if is_file(shipped):
                return shipped
    raise not_found("scenario", str(ref), "scenarios",
                    "an existing YAML file or a shipped scenario name")


def include(raw: Any, key: str, base: Path, folder: str) -> Any:
    """Replace a path-valued section with the mapping the file holds."""
    if not isinstance(raw, str):
        return raw
    found = resolve_path(raw, base, folder, (".yaml", ".yml"))
    if found is None:
        raise not_found(key, raw, folder, "an existing file or a shipped name")
    data = read_yaml(found, key)
    if not isinstance(data, Mapping):
        raise InputError(key, raw, "a YAML mapping")
    out = dict(data)
    out.setdefault("source_file", str(found))
    return out


def elaborate(raw: Mapping[str, Any], base: Path) -> dict[str, Any]:
    """Inline the files a scenario names (model, workload, topology)."""
    data = dict(raw)
    for key, folder in (("model", "workloads/models"), ("workload", "workloads")):
        if key in data:
            sub = include(data[key], key, base, folder)
            if isinstance(sub, dict):
                sub.pop("source_file", None)
            data[key] = sub
    topo = data.get("topology")
    if isinstance(topo, str):
        found = resolve_path(topo, base, "topologies", (".yaml", ".yml"))
        if found is None:
            raise not_found("topology", topo, "topologies",
                            "a shipped topology name or an existing file")
        data["topology"] = str(found)
    workload = data.get("workload")
    if isinstance(workload, dict):
        data["workload"] = resolve_length_paths(workload, base)
    return data


def resolve_length_paths(workload: dict[str, Any], base: Path) -> dict[str, Any]:
    """Make an empirical distribution's ``path`` absolute so the scenario is portable."""
    lengths = workload.get("lengths")
    if isinstance(lengths, dict) and isinstance(lengths.get("path"), str):
        found = resolve_path(lengths["path"], base, "workloads", ())
        if found is None:
            raise InputError("workload.lengths.path", lengths["path"], "an existing file")
        workload = {**workload, "lengths": {**lengths, "path": str(found)}}
    return workload


def parse_override(text: str) -> tuple[list[str], Any]:
    """``a.b.c=value`` -> (["a","b","c"], yaml-parsed value)."""
    key, sep, value = text.partition("=")
    if not sep or not key or any(not part for part in key.split(".")):
        raise InputError("--set", text, "KEY=VALUE as one word, e.g. parallelism.dp=4")
    return key.split("."), parse_value(value, key)


def apply_overrides(data: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Apply ``--set`` overrides to a raw scenario mapping (returns a deep copy)."""
    out = copy.deepcopy(data)
    for text in overrides:
        keys, value = parse_override(text)
        node: Any = out
        for i, k in enumerate(keys[:-1]):
            nxt = node.get(k) if isinstance(node, dict) else None
            if nxt is None:
                nxt = {}
                node[k] = nxt
            elif not isinstance(nxt, dict):
                raise InputError("--set", text, f"{'.'.join(keys[: i + 1])} is not a section")
            node = nxt
        node[keys[-1]] = value
    return out


#: (dotted key) -> the registered parts that read it (a layer above the config knows them:
#: the training kind passes the balancers whose own config model has a ``balancer.*`` key).
KeyReaders = Callable[[str], list[str]]


def unknown_key(dotted: str, kind: str | None, readers_of: KeyReaders | None = None,
                kinds_of: KeyReaders | None = None) -> str:
    """Why a key is refused: unknown anywhere, or read only by another scenario kind
    (``kinds_of``: the kinds whose models have the key, given by the scenario models above
    this module) or (``readers_of``) another training balancer."""
    owners = kinds_of(dotted) if kind is not None and kinds_of is not None else []
    if owners:
        return f"no such key for kind={kind} (only kind={' | '.join(owners)} reads it)"
    readers = readers_of(dotted) if readers_of is not None and kind is not None else []
    if readers:
        return f"no such key for this balancer.policy (only {' | '.join(readers)} reads it)"
    return "no such key (unknown key)"


def pydantic_line(
    exc: ValidationError, prefix: str = "", kind: str | None = None, model: type | None = None,
    readers_of: KeyReaders | None = None, kinds_of: KeyReaders | None = None,
) -> InputError:
    """Turn the first pydantic error into the one-line contract (``kind``: the scenario's,
    so that a knob of another kind says so; ``model``: the validated one, whose field names
    an unknown key is matched against for a "did you mean"; ``readers_of``: see
    :func:`unknown_key`, as ``kinds_of``)."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-"))
    inner = (err.get("ctx") or {}).get("error")
    if isinstance(inner, InputError):
        # A cross-field rule raised inside a nested model: prefix its path.
        where = ".".join(x for x in (prefix.rstrip("."), loc, inner.field) if x)
        return InputError(where, inner.value, inner.allowed)
    field = f"{prefix}{loc}" if loc else (prefix.rstrip(".") or "scenario")
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = unknown_key(f"{prefix}{loc}", kind, readers_of, kinds_of)
        if model is not None and msg.endswith("(unknown key)"):
            parts = tuple(err["loc"])
            msg += did_you_mean(str(parts[-1]), fields_at(model, parts[:-1]))
    value = err.get("input", "")
    if isinstance(value, Mapping):
        value = "{...}"
    return InputError(field, value, msg)


def validate(
    model: type[Frozen], data: Any, prefix: str = "", kind: str | None = None,
    readers_of: KeyReaders | None = None, kinds_of: KeyReaders | None = None,
) -> Any:
    """Validate ``data`` into ``model`` with the one-line error contract (``kind`` and
    ``readers_of``, ``kinds_of`` as for :func:`pydantic_line`)."""
    if not isinstance(data, Mapping):
        raise InputError(prefix.rstrip(".") or "scenario", data, "a YAML mapping")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise pydantic_line(exc, prefix, kind, model, readers_of, kinds_of) from None


def load_workload(path: str | Path, overrides: Iterable[str] = ()) -> WorkloadSpec:
    """Load a workload file on its own (for ``libra-des plan --workload``)."""
    found = resolve_path(str(path), Path.cwd(), "workloads", (".yaml", ".yml"))
    if found is None:
        raise InputError("--workload", str(path), "an existing workload YAML file")
    raw = read_yaml(found, "workload")
    if not isinstance(raw, Mapping):
        raise InputError("workload", str(path), "a YAML mapping")
    data = resolve_length_paths(apply_overrides(dict(raw), overrides), found.parent)
    workload: WorkloadSpec = validate(WorkloadSpec, data, "workload.")
    return workload


LengthDist.model_rebuild()
