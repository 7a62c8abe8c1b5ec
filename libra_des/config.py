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
from typing import Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationError,
    field_validator,
    model_validator,
)

from libra_des import training_balancers
from libra_des.errors import InputError
from libra_des.identity import portable_paths
from libra_des.validation import (
    check_gpus,
    check_limits,
    check_model,
    check_training,
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


class TrainingParallelism(Frozen):
    """DP x PP x CP (x TP) layout; ``gbs`` packed sequences per optimizer step."""

    dp: int = Field(default=1, gt=0)
    pp: int = Field(default=1, gt=0)
    cp: int = Field(default=1, gt=0)
    tp: int = Field(default=1, gt=0)
    gbs: int = Field(default=16, gt=0)
    schedule: Literal["gpipe", "1f1b", "interleaved"] = "1f1b"
    virtual_stages: int = Field(default=1, gt=0)

    @model_validator(mode="after")
    def _check(self) -> TrainingParallelism:
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


#: The training layout under its former name.
Parallelism = TrainingParallelism


class MoeParallelism(Frozen):
    """Expert parallelism of a prefill node group: ``ep`` GPUs hold the experts; attention is
    data-parallel (``tp`` 1) or tensor-parallel over the EP group (``tp`` = ``ep``)."""

    ep: int = Field(default=8, gt=0)
    tp: int = Field(default=1, gt=0)

    @property
    def gpus(self) -> int:
        return self.ep


class TrainingBalancerSpec(Frozen):
    """A training balancer's section: the policy (``training_balancers``) and its knobs.

    The knobs here are shared by every balancer: the shipped scenarios set TAP's knobs and
    sweep ``balancer.policy`` over all four balancers by ``--set``, so a knob another
    balancer does not read must stay valid. A balancer that reads knobs of its own declares a
    subclass as its ``config`` (:class:`~libra_des.training_balancers.TrainingBalancer`;
    WLB-LLM's ``wlb_defer_outliers``), and the section is validated with it.
    """

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


#: The training balancer section under its former name.
Balancer = TrainingBalancerSpec


class MoeBalancerSpec(Frozen):
    """An MoE system (``plan.moe.registry``) and the prefill knobs of docs/model.md B.

    ``slots``: extra expert slots N per GPU; ``alpha``: locality share; ``predictor``: how
    the next layer's routing is forecast; EPLB's ``redundant_experts`` per layer (the paper
    replicates 8 hot experts per layer) and the token-sharding stop rule: max GPU load <=
    mean * (1 + ``shard_tolerance``).
    """

    policy: str = "libra"
    slots: int = Field(default=8, ge=0)
    alpha: float = Field(default=0.5, ge=0, le=1)
    predictor: Literal["oracle", "lookahead", "lina", "injected"] | None = None
    accuracy: float | None = Field(default=None, ge=0, le=1)
    error_bias: Literal["popular", "random"] = "popular"
    dispatch: Literal["auto", "all2all", "allgather"] = "auto"
    cpu_time: Literal["measured", "modelled"] = "modelled"
    redundant_experts: int = Field(default=8, ge=0)
    shard_tolerance: float = Field(default=0.01, ge=0)


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


class ScenarioBase(Frozen):
    """The top-level keys every scenario kind shares.

    Each kind is a subclass with only the sections and knobs it reads (a key of the other
    kind is an unknown key: bad input); ``kind`` selects the subclass (:data:`SCENARIO_KINDS`).
    """

    kind: str
    seed: int = Field(default=0, ge=0)
    topology: str | dict[str, Any] = "h200-roce-railopt"
    topology_params: dict[str, Any] = Field(default_factory=dict)
    profile: str | dict[str, Any] | None = None
    model: ModelSpec
    variance: VarianceSpec = VarianceSpec()
    #: Network model (``sim/network/model.py``): ``fast`` the alpha-beta cost model (training
    #: folds its times into op durations, MoE runs them on shared per-GPU ports), ``detailed``
    #: flows on the topology (training's attention exchange and hand-offs, MoE's dispatch,
    #: combine and replica copies).
    fidelity: Literal["fast", "detailed"] = "fast"
    name: str = "scenario"

    @model_validator(mode="after")
    def _check_shared(self) -> ScenarioBase:
        check_model(self.model)
        check_gpus(self.gpus)
        return self

    @property
    def gpus(self) -> int:
        """GPUs the scenario occupies."""
        raise NotImplementedError  # each kind's layout says

    def tags(self) -> dict[str, Any]:
        """What a trace's metadata says about the scenario."""
        return {"scenario": self.name, "seed": self.seed, "kind": self.kind,
                "fidelity": self.fidelity}


class TrainingScenario(ScenarioBase):
    """Long-context training: ``steps`` optimizer steps of a DP x PP x CP (x TP) job."""

    kind: Literal["training"] = "training"
    steps: int = Field(default=1, gt=0)
    workload: TrainingWorkload
    parallelism: TrainingParallelism = TrainingParallelism()
    # SerializeAsAny: a balancer's own config subclass dumps its own knobs too.
    balancer: SerializeAsAny[TrainingBalancerSpec] = TrainingBalancerSpec()
    memory: MemorySpec = MemorySpec()
    comm_free: bool = False
    attention_only: bool = False

    @model_validator(mode="before")
    @classmethod
    def _balancer_model(cls, data: Any) -> Any:
        """Validate ``balancer`` with the config model its policy declares (if it has one)."""
        bal = data.get("balancer") if isinstance(data, Mapping) else None
        if not isinstance(bal, Mapping):
            return data
        policy = bal.get("policy", TrainingBalancerSpec.model_fields["policy"].default)
        own = training_balancers.config_of(policy) if isinstance(policy, str) else None
        if own is None:
            return data
        return {**data, "balancer": validate(own, bal, "balancer.")}

    @model_validator(mode="after")
    def _check(self) -> TrainingScenario:
        check_balancer(self.balancer, self.parallelism, self.model)
        if self.workload.lengths is None:
            raise InputError("workload.lengths", None, "a length distribution for training")
        check_training(self)
        return self

    @property
    def gpus(self) -> int:
        return self.parallelism.gpus

    def tags(self) -> dict[str, Any]:
        return {**super().tags(), "policy": self.balancer.policy}


class MoeScenario(ScenarioBase):
    """MoE prefill: ``workload.batches`` batches through one EP group (docs/model.md B)."""

    kind: Literal["moe_inference"] = "moe_inference"
    workload: MoeWorkload
    parallelism: MoeParallelism = MoeParallelism()
    balancer: MoeBalancerSpec = MoeBalancerSpec()

    @model_validator(mode="after")
    def _check(self) -> MoeScenario:
        if not self.model.is_moe:
            raise InputError("model.experts", 0, "> 0 for moe_inference")
        return self

    @property
    def gpus(self) -> int:
        return self.parallelism.gpus

    def tags(self) -> dict[str, Any]:
        return {**super().tags(), "fidelity": self.fidelity, "policy": self.balancer.policy}


#: A scenario of any kind (the union ``load_scenario`` returns one member of).
Scenario = TrainingScenario | MoeScenario
#: Scenario kinds by their ``kind`` value: the discriminated union's members. A YAML file
#: without ``kind`` is a training scenario.
SCENARIO_KINDS: Mapping[str, type[ScenarioBase]] = {
    "training": TrainingScenario,
    "moe_inference": MoeScenario,
}
DEFAULT_KIND = "training"


def require_training(sc: Scenario, why: str) -> TrainingScenario:
    """``sc`` as a training scenario, or bad input saying what needs one (``why``)."""
    if not isinstance(sc, TrainingScenario):
        raise InputError("kind", sc.kind, f"{TrainingScenario.model_fields['kind'].default} "
                         f"({why})")
    return sc


def check_balancer(bal: TrainingBalancerSpec, par: TrainingParallelism, model: ModelSpec) -> None:
    """Cross-field rules between a training balancer, the layout and the model."""
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


def key_kinds(dotted: str) -> list[str]:
    """The scenario kinds whose models have the dotted key ``a.b.c``."""
    out = []
    for name, model in SCENARIO_KINDS.items():
        node: Any = model
        for part in dotted.split("."):
            fields = getattr(node, "model_fields", {})
            if part not in fields:
                break
            node = fields[part].annotation
            # ``X | None`` and ``SerializeAsAny[X]``: the model inside.
            node = next((a for a in (*get_args(node), node) if hasattr(a, "model_fields")), node)
        else:
            out.append(name)
    return out


def key_balancers(dotted: str) -> list[str]:
    """The training balancers whose own config model has the ``balancer.*`` key."""
    section, _, name = dotted.partition(".")
    if section != "balancer":
        return []
    return [b for b in training_balancers.names()
            if name in getattr(training_balancers.config_of(b), "model_fields", {})]


def unknown_key(dotted: str, kind: str | None) -> str:
    """Why a key is refused: unknown anywhere, or read only by another scenario kind or
    another training balancer."""
    owners = key_kinds(dotted) if kind is not None else []
    if owners:
        return f"no such key for kind={kind} (only kind={' | '.join(owners)} reads it)"
    readers = key_balancers(dotted) if kind is not None else []
    if readers:
        return f"no such key for this balancer.policy (only {' | '.join(readers)} reads it)"
    return "no such key (unknown key)"


def pydantic_line(exc: ValidationError, prefix: str = "", kind: str | None = None) -> InputError:
    """Turn the first pydantic error into the one-line contract (``kind``: the scenario's,
    so that a knob of another kind says so)."""
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
        msg = unknown_key(f"{prefix}{loc}", kind)
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


def validate_scenario(data: Any) -> Scenario:
    """Validate a raw scenario mapping into the model its ``kind`` names."""
    if not isinstance(data, Mapping):
        raise InputError("scenario", data, "a YAML mapping")
    kind = data.get("kind", DEFAULT_KIND)
    model = SCENARIO_KINDS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise InputError("kind", kind, " | ".join(SCENARIO_KINDS))
    try:
        scenario: Scenario = model.model_validate(data)  # type: ignore[assignment]
    except ValidationError as exc:
        raise pydantic_line(exc, "", kind) from None
    return scenario


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
    return validate_scenario(data)


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
