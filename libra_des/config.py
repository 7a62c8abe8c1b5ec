"""Scenario description: YAML in, frozen validated objects out.

A scenario is one YAML file whose ``model``, ``workload``, ``topology`` and ``profile`` may be
paths to other YAML/JSON files. Loading is three steps, in the desmod spirit of
describe -> elaborate -> run:

1. read the YAML (and the files it names) into one plain mapping;
2. apply ``--set dotted.key=value`` overrides to that mapping;
3. validate it with pydantic into frozen objects, including cross-field rules
   (P | DP, DP | GBS, H | heads_q, M | heads_q/H, ...).

Any failure becomes :class:`~libra_des.errors.InputError` (one line, exit status 2).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from libra_des import training_balancers
from libra_des.errors import InputError
from libra_des.identity import portable_paths
from libra_des.validation import (
    check_limits,
    check_scenario,
    is_file,
    parse_value,
    parse_yaml,
    read_bounded,
    strict_fields,
)

#: Repository root: shipped topologies, workloads and profiles are found relative to it.
ROOT = Path(__file__).resolve().parent.parent

TRAINING_POLICIES = ("ulysses", "wlb_llm", "distca", "libra")
#: The shipped MoE systems (kept equal to ``plan.moe.registry.BUILTIN`` by a test); a scenario
#: may name any registered system, which the registry checks at elaboration.
MOE_POLICIES = ("sglang", "eplb", "lina", "harmoeny", "libra")


class Frozen(BaseModel):
    """Base for every configuration object: immutable, unknown keys rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _strict_input(cls, data: Any) -> Any:
        # No bool-as-int, string-as-number or non-finite values (libra_des.validation).
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
    ``mixture``: weighted ``components``.
    """

    kind: Literal["lognormal_pareto", "empirical", "constant", "mixture"] = "lognormal_pareto"
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

    @model_validator(mode="after")
    def _check(self) -> LengthDist:
        if self.kind == "lognormal_pareto" and self.median is None:
            raise InputError("median", None, "> 0 for lognormal_pareto (with p99)")
        if self.kind == "constant" and self.value is None and self.median is None:
            raise InputError("value", None, "> 0 for constant")
        if self.kind == "empirical" and not self.path:
            raise InputError("path", None, "a lengths file for empirical")
        if self.kind == "mixture" and not self.components:
            raise InputError("components", (), "a non-empty list for mixture")
        return self


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


class WorkloadSpec(Frozen):
    """Data: training corpora (``lengths`` + ``packed_length``) or MoE prefill batches."""

    name: str = "workload"
    packed_length: int = Field(default=262_144, gt=0)
    lengths: LengthDist | None = None
    batch: int = Field(default=32, gt=0)
    seq_len: int = Field(default=1024, gt=0)
    batches: int = Field(default=4, gt=0)
    routing: RoutingSpec | None = None
    # Training MoE layers: expert loads from the routing model (``routing`` or its defaults),
    # so the slowest EP rank sets each layer's time; false runs perfectly balanced experts.
    expert_skew: bool = True
    source: str | None = None


class Parallelism(Frozen):
    """DP x PP x CP (x TP) layout; ``gbs`` packed sequences per optimizer step."""

    dp: int = Field(default=1, gt=0)
    pp: int = Field(default=1, gt=0)
    cp: int = Field(default=1, gt=0)
    tp: int = Field(default=1, gt=0)
    ep: int = Field(default=8, gt=0)
    gbs: int = Field(default=16, gt=0)
    schedule: Literal["gpipe", "1f1b", "interleaved"] = "1f1b"
    virtual_stages: int = Field(default=1, gt=0)

    @model_validator(mode="after")
    def _check(self) -> Parallelism:
        if self.gbs % self.dp:
            raise InputError("gbs", self.gbs, f"a multiple of dp={self.dp}")
        if self.schedule != "interleaved" and self.virtual_stages != 1:
            raise InputError("virtual_stages", self.virtual_stages, "1 unless interleaved")
        return self

    @property
    def microbatches(self) -> int:
        """Packed sequences (microbatches) per replica per step."""
        return self.gbs // self.dp

    @property
    def gpus(self) -> int:
        return self.dp * self.pp * self.cp * self.tp


class Balancer(Frozen):
    """Load-balancing policy and its knobs (training and MoE share one section)."""

    policy: str = "libra"
    pool_size: int = Field(default=8, gt=0)
    # TAP's head split H and block size B; ``auto`` lets the configuration simulator choose
    # them per run (libra_des.plan.tap_autotune).
    heads_split: int | str = "auto"
    block_size: int | str = "auto"
    slack: float = Field(default=0.03, ge=0)
    chunks: int = Field(default=4, gt=0)
    vrsp: bool = True
    pipeliner: bool = True
    wlb_defer_outliers: bool = False
    # MoE prefill knobs (part B): extra slots N per GPU, locality share alpha, predictor.
    slots: int = Field(default=8, ge=0)
    alpha: float = Field(default=0.5, ge=0, le=1)
    predictor: Literal["oracle", "lookahead", "lina", "injected"] | None = None
    accuracy: float | None = Field(default=None, ge=0, le=1)
    error_bias: Literal["popular", "random"] = "popular"
    dispatch: Literal["auto", "all2all", "allgather"] = "auto"
    cpu_time: Literal["measured", "modelled"] = "modelled"
    # EPLB's redundant experts per layer (the paper replicates 8 hot experts per layer) and
    # the token-sharding stop rule: max GPU load <= mean * (1 + shard_tolerance).
    redundant_experts: int = Field(default=8, ge=0)
    shard_tolerance: float = Field(default=0.01, ge=0)

    @field_validator("heads_split", "block_size", mode="before")
    @classmethod
    def _tap_knob(cls, value: Any) -> Any:
        positive = isinstance(value, int) and not isinstance(value, bool) and value > 0
        if value == "auto" or positive:
            return value
        raise ValueError("a positive integer or auto")

    def tap_knobs(self) -> tuple[int, int]:
        """(H, B) once resolved (``auto`` is replaced before planning)."""
        h, b = self.heads_split, self.block_size
        if not isinstance(h, int) or not isinstance(b, int):
            raise InputError("balancer.heads_split", h, "resolved before planning (internal)")
        return h, b


class VarianceSpec(Frozen):
    """Runtime-variance knobs; ``enabled: false`` gives a noiseless run.

    Fields left at ``None`` take the calibrated defaults of
    :mod:`libra_des.hardware.variance` (fitted to the paper's 256-GPU attention-noise spread).
    ``failslow_rate`` is the chance per GPU per step that an episode starts; an episode lasts
    ``failslow_steps`` steps on average and slows the GPU by ``failslow_factor``.
    """

    enabled: bool = True
    noise_sigma: float | None = Field(default=None, ge=0)
    slow_gpu_fraction: float = Field(default=0.0, ge=0, le=1)
    slow_factor: float = Field(default=1.0, ge=1)
    failslow_rate: float | None = Field(default=None, ge=0, le=1)
    failslow_factor: float | None = Field(default=None, ge=1)
    failslow_steps: float | None = Field(default=None, ge=1)
    degraded_link_fraction: float = Field(default=0.0, ge=0, le=1)
    degraded_link_factor: float = Field(default=1.0, ge=1)


class MemorySpec(Frozen):
    """Training memory policy (see :mod:`libra_des.hardware.memory` and ``docs/memory.md``).

    ``recompute``: what a layer's backward recomputes instead of keeping (none | selective |
    full). ``keep_remote_kv``: keep the remote K/V groups, remote Q and computed O of TAP /
    Ulysses until the backward (memory), or free them and fetch again (time). ``check``:
    ``error`` refuses a run whose peak exceeds the usable HBM (exit 2), ``warn`` simulates it
    and reports ``oom: true``. ``usable_fraction``: share of HBM a training job can fill
    (assumption: CUDA context, NCCL buffers and allocator fragmentation take about 10%).
    ``distributed_optimizer``: shard optimizer states over the reduction group (ZeRO-1).
    """

    recompute: Literal["none", "selective", "full"] = "none"
    keep_remote_kv: bool = True
    check: Literal["error", "warn"] = "error"
    usable_fraction: float = Field(default=0.9, gt=0, le=1)
    distributed_optimizer: bool = True


class Scenario(Frozen):
    """One fully resolved scenario (the contract of the top-level keys)."""

    kind: Literal["training", "moe_inference"] = "training"
    seed: int = Field(default=0, ge=0)
    steps: int = Field(default=1, gt=0)
    topology: str | dict[str, Any] = "h200-roce-railopt"
    topology_params: dict[str, Any] = Field(default_factory=dict)
    profile: str | dict[str, Any] | None = None
    model: ModelSpec
    workload: WorkloadSpec
    parallelism: Parallelism = Parallelism()
    balancer: Balancer = Balancer()
    variance: VarianceSpec = VarianceSpec()
    memory: MemorySpec = MemorySpec()
    fidelity: Literal["fast", "detailed"] = "fast"
    comm_free: bool = False
    attention_only: bool = False
    name: str = "scenario"

    @model_validator(mode="after")
    def _check(self) -> Scenario:
        check_balancer(self.kind, self.balancer, self.parallelism, self.model)
        if self.kind == "training" and self.workload.lengths is None:
            raise InputError("workload.lengths", None, "a length distribution for training")
        if self.kind == "moe_inference" and not self.model.is_moe:
            raise InputError("model.experts", 0, "> 0 for moe_inference")
        check_scenario(self)
        return self


def check_balancer(kind: str, bal: Balancer, par: Parallelism, model: ModelSpec) -> None:
    """Cross-field rules between the balancer, the layout and the model."""
    if kind != "training":
        return  # an MoE system is looked up in plan.moe.registry (above this layer)
    policies = training_balancers.names()
    if bal.policy not in policies:
        raise InputError("balancer.policy", bal.policy, " | ".join(policies))
    if training_balancers.get(bal.policy).pool == "configured" and par.dp % bal.pool_size:
        raise InputError("balancer.pool_size", bal.pool_size, f"a divisor of dp={par.dp}")
    if not isinstance(bal.heads_split, int):
        if not any(model.heads_q % h == 0 and (model.heads_q // h) % bal.chunks == 0
                   for h in range(1, model.heads_q + 1)):
            raise InputError("balancer.chunks", bal.chunks, f"a divisor of heads_q={model.heads_q}")
        return
    if model.heads_q % bal.heads_split:
        raise InputError(
            "balancer.heads_split", bal.heads_split, f"a divisor of heads_q={model.heads_q}"
        )
    per_shard = model.heads_q // bal.heads_split
    if per_shard % bal.chunks:
        raise InputError("balancer.chunks", bal.chunks, f"a divisor of heads_q/H={per_shard}")


# ----------------------------------------------------------------------------- loading


def read_yaml(path: str | Path, field: str = "scenario") -> Any:
    """Read one YAML file; missing, unreadable or malformed files are input errors."""
    p = Path(path)
    try:
        text = read_bounded(p)
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


def include(raw: Any, key: str, base: Path, folder: str) -> Any:
    """Replace a path-valued section with the mapping the file holds."""
    if not isinstance(raw, str):
        return raw
    found = resolve_path(raw, base, folder, (".yaml", ".yml"))
    if found is None:
        raise InputError(key, raw, f"an existing file (looked in ., {folder}/)")
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
            raise InputError("topology", topo, "a shipped topology name or an existing file")
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
        raise InputError("--set", text, "dotted.key=value")
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


def pydantic_line(exc: ValidationError, prefix: str = "") -> InputError:
    """Turn the first pydantic error into the one-line contract."""
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
        msg = "no such key (unknown key)"
    value = err.get("input", "")
    if isinstance(value, Mapping):
        value = "{...}"
    return InputError(field, value, msg)


def validate(model: type[Frozen], data: Any, prefix: str = "") -> Any:
    """Validate ``data`` into ``model`` with the one-line error contract."""
    if not isinstance(data, Mapping):
        raise InputError(prefix.rstrip(".") or "scenario", data, "a YAML mapping")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise pydantic_line(exc, prefix) from None


def load_scenario(path: str | Path, overrides: Iterable[str] = ()) -> Scenario:
    """Describe -> elaborate -> validate one scenario file."""
    raw = read_yaml(path)
    if not isinstance(raw, Mapping):
        raise InputError("scenario", str(path), "a YAML mapping at the top level")
    base = Path(path).resolve().parent
    data = elaborate(raw, base)
    for text in overrides:
        # Elaborate after each override so that `workload=longctx-1m` followed by
        # `workload.lengths.kind=constant` edits the freshly included file.
        data = elaborate(apply_overrides(data, [text]), base)
    scenario: Scenario = validate(Scenario, data)
    return scenario


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


def scenario_dict(scenario: Scenario) -> dict[str, Any]:
    """The fully resolved scenario as plain JSON-able data (for result files).

    Absolute paths become project- or cwd-relative (:mod:`libra_des.identity`), so result
    files do not depend on where the checkout lives.
    """
    return dict(portable_paths(scenario.model_dump(mode="json")))


LengthDist.model_rebuild()
