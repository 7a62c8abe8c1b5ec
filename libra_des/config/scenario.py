"""Scenario models: the validated form of a whole scenario file (training and MoE prefill).

A scenario kind is a :class:`ScenarioBase` subclass with only the sections and knobs it reads
(layout, balancer, variance, memory), chosen by ``kind`` (:data:`SCENARIO_KINDS`). The models
they are built from that ``libra-des plan`` also reads on its own (model shape, workload) and
the YAML loading steps live in :mod:`libra_des.config`, which re-exports every name here on
first use: building these models is work a short command that never loads a scenario
(``libra-des plan --workload``) need not pay (docs/architecture.md, *config/*).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import (
    ConfigDict,
    Field,
    SerializeAsAny,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from libra_des.base.identity import portable_paths
from libra_des.config.ignored_knobs import ignored_variance_knob
from libra_des.config.loading import (
    Frozen,
    ModelSpec,
    MoeWorkload,
    TrainingWorkload,
    apply_overrides,
    elaborate,
    pydantic_line,
    read_yaml,
    shipped_scenario,
    validate,
)
from libra_des.config.validation import check_gpus, check_model, check_training
from libra_des.errors import InputError


class TrainingParallelism(Frozen):
    """DP x PP x CP (x TP) layout; ``gbs`` packed sequences per optimizer step."""

    dp: int = Field(default=1, gt=0)
    pp: int = Field(default=1, gt=0)
    cp: int = Field(default=1, gt=0)
    tp: int = Field(default=1, gt=0)
    gbs: int = Field(default=16, gt=0)
    #: A registered pipeline schedule (``sim/training/schedules.py``; the training kind's
    #: ``elaborate`` looks it up, with the model chunks it takes).
    schedule: str = "1f1b"
    virtual_stages: int = Field(default=1, gt=0)

    @model_validator(mode="after")
    def _check(self) -> TrainingParallelism:
        if self.gbs % self.dp:
            raise InputError("gbs", self.gbs, f"a multiple of dp={self.dp}")
        if self.tp != 1:
            # The training simulator runs DP x PP x CP: a tp it does not execute would still
            # divide MFU by tp x the GPUs, so it is refused rather than ignored.
            raise InputError("tp", self.tp, "1 (the training model executes DP x PP x CP; "
                             "tensor parallelism is not modelled)")
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
    """A training balancer's section: the policy (a registered training balancer) and its knobs.

    The knobs here are shared by every balancer: the shipped scenarios set TAP's knobs and
    sweep ``balancer.policy`` over all four balancers by ``--set``, so a knob another
    balancer does not read must stay valid. A balancer that reads knobs of its own declares a
    subclass as its ``config`` (:class:`~libra_des.plan.balancers.balancer.TrainingBalancer`;
    WLB-LLM's ``wlb_defer_outliers``). The config layer cannot see the registry (it sits
    below it), so it keeps keys it does not know in an :class:`UnresolvedBalancerSpec`; the
    training kind's ``elaborate`` (``kinds/training.py``) checks the policy's name and pool
    rule and validates the section with the policy's own model, before any work.
    """

    policy: str = "libra"
    pool_size: int = Field(default=8, gt=0)
    # TAP's head split H and block size B; ``auto`` lets the configuration simulator choose
    # them per run (libra_des.sim.training.tap_autotune).
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


class UnresolvedBalancerSpec(TrainingBalancerSpec):
    """A balancer section with keys the shared model does not have, kept (unvalidated) for
    the training kind's ``elaborate``, which validates them with the policy's own model."""

    model_config = ConfigDict(frozen=True, extra="allow")


#: The training balancer section under its former name.
Balancer = TrainingBalancerSpec


class MoeBalancerSpec(Frozen):
    """An MoE system (``plan.moe.registry``) and the prefill knobs of docs/model.md B.

    ``slots``: extra expert slots N per GPU; ``alpha``: locality share; EPLB's
    ``redundant_experts`` per layer (the paper replicates 8 hot experts per layer) and the
    token-sharding stop rule: max GPU load <= mean * (1 + ``shard_tolerance``).

    Each system runs with the predictor, dispatch and stages of its registration
    (``plan.moe.registry``). ``override_predictor`` replaces the predictor of a system that
    has one (a study knob: the result then names it ``"<name> (override)"``); a system that
    plans without a prediction refuses it. ``accuracy`` forces the noisy predictors' accuracy.
    ``dispatch_kernel``: a DeepEP kernel needs All2All dispatch (an AllGather system refuses
    it) and NVSwitch nodes of at most 8 GPUs.
    """

    policy: str = "libra"
    slots: int = Field(default=8, ge=0)
    alpha: float = Field(default=0.5, ge=0, le=1)
    override_predictor: Literal["oracle", "lookahead", "lina", "injected"] | None = None
    accuracy: float | None = Field(default=None, ge=0, le=1)
    error_bias: Literal["popular", "random"] = "popular"
    dispatch: Literal["auto", "all2all", "allgather"] = "auto"
    #: Kernels that drive an All2All dispatch and combine: NCCL's all-to-all(v), or DeepEP
    #: V1's normal (NVLink-forwarded RDMA) or low-latency (pure per-pair messages) kernels
    #: (``hardware/collectives/deepep.py``; their SMs are charged to overlapped compute).
    dispatch_kernel: Literal["nccl", "deepep_normal", "deepep_low_latency"] = "nccl"
    cpu_time: Literal["measured", "modelled"] = "modelled"
    redundant_experts: int = Field(default=8, ge=0)
    shard_tolerance: float = Field(default=0.01, ge=0)


class VarianceSpec(Frozen):
    """Runtime-variance knobs; ``enabled: false`` gives a noiseless run.

    Fields left at ``None`` take the calibrated defaults of
    :mod:`libra_des.hardware.variance.model` (fitted to the paper's 256-GPU attention-noise spread).
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
    # Structured sources (hardware/variance/fleet_variance.py): None is off, or the fleet default
    # (docs/variance.md) under ``fleet: true``.
    fleet: bool = False
    gpu_speed_sigma: float | None = Field(default=None, ge=0, le=0.5)
    jitter_node_correlation: float | None = Field(default=None, ge=0, le=1)
    node_episode_rate: float | None = Field(default=None, ge=0, le=1)
    node_episode_steps: float | None = Field(default=None, ge=1)
    node_episode_factor: float | None = Field(default=None, ge=1)
    rack_episode_rate: float | None = Field(default=None, ge=0, le=1)
    rack_episode_steps: float | None = Field(default=None, ge=1)
    rack_episode_factor: float | None = Field(default=None, ge=1)
    rack_nodes: int | None = Field(default=None, ge=1)
    # Network links and host gaps (hardware/variance/link_host_variance.py), the same None rule.
    link_jitter_sigma: float | None = Field(default=None, ge=0, le=0.5)
    link_jitter_correlation: float | None = Field(default=None, ge=0, le=1)
    link_episode_rate: float | None = Field(default=None, ge=0, le=1)
    link_episode_steps: float | None = Field(default=None, ge=1)
    link_episode_factor: float | None = Field(default=None, ge=1)
    launch_gap_seconds: float | None = Field(default=None, ge=0, le=1)
    host_stall_rate: float | None = Field(default=None, ge=0, le=1)
    host_stall_seconds: float | None = Field(default=None, ge=0, le=3600)

    @model_validator(mode="after")
    def _no_ignored_knobs(self) -> VarianceSpec:
        ignored_variance_knob(self)
        return self


class MemorySpec(Frozen):
    """Training memory policy (see :mod:`libra_des.hardware.compute.memory` and ``docs/memory.md``).

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


class CommSpec(Frozen):
    """Collective overrides, the scenario analogues of ``NCCL_ALGO`` / ``NCCL_PROTO``.

    ``algorithm``: run every collective that has it with this algorithm (others keep NCCL's
    choice, as a per-function ``NCCL_ALGO`` list would); ``protocol``: restrict NCCL's tuner to
    this protocol. An algorithm or protocol the topology cannot run (NVLS without NVLink SHARP,
    CollNet without in-network reduction, LL128 over PCIe) is bad input, checked when the cost
    model is built (``hardware/collectives/nccl_tuner.py``).
    """

    algorithm: Literal[
        "ring", "tree", "nvls", "nvls_tree", "collnet_direct", "collnet_chain", "pat",
        "direct", "hierarchical", "multilevel",
    ] | None = None
    protocol: Literal["LL", "LL128", "Simple"] | None = None
    #: CTAs an NCCL channel runs (one: NCCL's grid is its channel count; 0: copy-engine
    #: transfers, which hold no SM); None: that default (``hardware/compute/interference.py``).
    sm_per_channel: int | None = Field(default=None, ge=0)
    #: Channels of every overlapped transfer; None: NCCL's tuner's choice where it prices
    #: the call, else the sourced default of ``hardware/compute/interference.py``.
    channels: int | None = Field(default=None, ge=1)


class OverlapSpec(Frozen):
    """Compute-communication overlap. ``interference: on`` (the default) slows an overlapped
    kernel by the SMs and HBM bandwidth the transfer beside it takes, and the transfer by the
    HBM the kernel holds (``hardware/compute/interference.py``; docs/model.md,
    "Compute-communication
    interference"); ``off``: overlap is free (the results of earlier versions, bit for bit).
    YAML's bare ``on`` / ``off`` (booleans to a YAML 1.1 reader) mean the same."""

    interference: Literal["on", "off"] = "on"

    @field_validator("interference", mode="before")
    @classmethod
    def _yaml_bool(cls, value: Any) -> Any:
        if value is True:
            return "on"
        return "off" if value is False else value


class NetworkSpec(Frozen):
    """How detailed fidelity routes flows between nodes (``hardware/fabric/routing.py``,
    ``docs/communication.md``); fast fidelity reads none of it.

    ``routing``: ``ecmp`` hashes each (source GPU, destination GPU) flow onto one switch per
    level; ``spray`` splits every flow evenly over all equal-cost paths (per-packet spraying,
    the ideal adaptive routing). ``ecmp_seed``: the root of the hash's salts (0 unless given:
    our assumption, any fixed value; it is independent of ``seed`` on purpose, so a noise sweep
    keeps its routes). ``ecmp_samples``: training steps run their communication under this
    many hashes (the first is the run's own) and report the spread (``ecmp`` in result.json).
    """

    routing: Literal["ecmp", "spray"] = "ecmp"
    ecmp_seed: int = Field(default=0, ge=0, lt=2**63)
    # Our bound: beyond 64 samples the spread's quantiles barely move; refuse absurd counts.
    ecmp_samples: int = Field(default=1, ge=1, le=64)


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
    #: ``own``: the profile must be measured on the topology's GPU; ``borrowed``: use it on
    #: another GPU anyway (the result carries a warning). See ``hardware/profiles/device_check.py``.
    profile_scope: Literal["own", "borrowed"] = "own"
    model: ModelSpec
    variance: VarianceSpec = VarianceSpec()
    comm: CommSpec = CommSpec()
    overlap: OverlapSpec = OverlapSpec()
    network: NetworkSpec = NetworkSpec()
    #: Network model, a name registered in ``sim/network/models.py`` (the kinds' ``elaborate``
    #: looks it up): ``fast`` the alpha-beta cost model (training folds its times into op
    #: durations, MoE runs them on shared per-GPU ports), ``detailed`` flows on the topology
    #: (training's attention exchange and hand-offs, MoE's dispatch, combine, replica copies).
    fidelity: str = "fast"
    name: str = "scenario"

    @model_validator(mode="after")
    def _check_shared(self) -> ScenarioBase:
        check_model(self.model)
        check_gpus(self.gpus)
        return self

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """``profile_scope`` appears in dumps (results, sweep ids) only when borrowed, and
        ``network`` only when not the default, so scenarios that never set them keep their
        recorded form."""
        data: dict[str, Any] = handler(self)
        if data.get("profile_scope") == "own":
            del data["profile_scope"]
        # Likewise the interference knobs at their defaults (modelled, NCCL's channels).
        if data.get("overlap") == {"interference": "on"}:
            del data["overlap"]
        comm = data.get("comm")
        if isinstance(comm, dict):
            for key in ("sm_per_channel", "channels"):
                if comm.get(key, 0) is None:
                    del comm[key]
        if data.get("network") == NetworkSpec().model_dump():
            del data["network"]  # likewise the default routing
        return data

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
        """Keep a ``balancer`` section's keys the shared model lacks for the kind's
        ``elaborate`` (a balancer's own knobs; see :class:`TrainingBalancerSpec`)."""
        bal = data.get("balancer") if isinstance(data, Mapping) else None
        if not isinstance(bal, Mapping) or set(bal) <= set(TrainingBalancerSpec.model_fields):
            return data
        return {**data, "balancer": validate(UnresolvedBalancerSpec, bal, "balancer.")}

    @model_validator(mode="after")
    def _check(self) -> TrainingScenario:
        check_tap_knobs(self.balancer, self.model)
        if self.workload.lengths is None:
            raise InputError("workload.lengths", None, "a length distribution for training")
        check_training(self)
        return self

    @property
    def gpus(self) -> int:
        return self.parallelism.gpus

    def tags(self) -> dict[str, Any]:
        return {**super().tags(), "policy": self.balancer.policy}


class MoeModelSpec(ModelSpec):
    """An MoE model with the number format its routed experts run in: ``bf16`` (weights and
    activations in BF16) or ``fp8`` (FP8 expert weights and activations, BF16 outputs), which
    picks the grouped-GEMM kernel each system ships for it
    (``hardware/compute/grouped_kernels.py``)."""

    dtype: Literal["bf16", "fp8"] = "bf16"


class MoeScenario(ScenarioBase):
    """MoE prefill: ``workload.batches`` batches through one EP group (docs/model.md B)."""

    kind: Literal["moe_inference"] = "moe_inference"
    model: MoeModelSpec
    workload: MoeWorkload
    parallelism: MoeParallelism = MoeParallelism()
    balancer: MoeBalancerSpec = MoeBalancerSpec()

    @model_validator(mode="after")
    def _check(self) -> MoeScenario:
        if not self.model.is_moe:
            raise InputError("model.experts", 0, "> 0 for moe_inference")
        if self.network.ecmp_samples != 1:
            raise InputError("network.ecmp_samples", self.network.ecmp_samples,
                             "1 for moe_inference (an ECMP ensemble runs training steps)")
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


def check_tap_knobs(bal: TrainingBalancerSpec, model: ModelSpec) -> None:
    """Cross-field rules between TAP's knobs and the model (the policy's name and pool rule
    need the balancer registry: the training kind's ``elaborate`` checks them)."""
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
        raise pydantic_line(exc, "", kind, model, kinds_of=key_kinds) from None
    return scenario


def load_scenario(path: str | Path, overrides: Iterable[str] = ()) -> Scenario:
    """Describe -> elaborate -> validate one scenario file (or shipped scenario name)."""
    path = shipped_scenario(path)
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


def scenario_dict(scenario: Scenario) -> dict[str, Any]:
    """The fully resolved scenario as plain JSON-able data (for result files).

    Absolute paths become project- or cwd-relative (:mod:`libra_des.base.identity`), so result
    files do not depend on where the checkout lives.
    """
    return dict(portable_paths(scenario.model_dump(mode="json")))
