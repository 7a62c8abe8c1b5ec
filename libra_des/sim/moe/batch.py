"""Per-system wiring of an MoE prefill layer: the planner per batch and the stage graph.

:class:`Wiring` says what each system does (see ``sim.moe.simulator``'s module doc);
:class:`BatchPlanner` turns a batch's routing into per-layer plans; :func:`run_batch` builds
every layer's stage graph and executes it in SimPy.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from libra_des.config import ROOT, RoutingSpec, resolve_path
from libra_des.config import MoeScenario as Scenario
from libra_des.errors import InputError
from libra_des.hardware.variance.model import VarianceModel
from libra_des.plan.moe import MoeLayerPlan, MoeSetup, rebalance_experts, static_home
from libra_des.plan.moe.registry import MoeSystem, PlanInputs, moe_system
from libra_des.sim.moe.block import GATE, PRE_GATE, TAIL
from libra_des.sim.moe.costs import BatchShape, LayerCosts
from libra_des.sim.moe.layer import Stage, critical_exposure, launch, stage_spans
from libra_des.sim.moe.setup import batch_lengths, expert_bytes
from libra_des.sim.network.model import NetworkModel
from libra_des.workload.predictors import (
    Predictor,
    make_predictor,
    predictor_kind,
)
from libra_des.workload.routing import (
    RouterModel,
    RoutingTrace,
    check_experts,
    generate_trace,
    load_trace,
    request_datasets,
)


@dataclass(frozen=True)
class Wiring:
    """Which stages a system runs and what waits for what."""

    policy: str
    predictor: str | None
    allgather: bool
    gpu_predict: bool  # a prediction kernel on the GPU stream (lookahead)
    cpu_predict: bool  # a path-table lookup on the CPU (Lina), off the critical path
    prefetch: bool  # replicas for the next layer copied during this one
    fetch: bool  # weights fetched from host memory after planning, this layer (HarMoEny)
    cpu_plan: bool
    two_stage: bool

    overridden: bool = False  # the predictor is the scenario's ``override_predictor``
    #: The kernels of an All2All dispatch and combine (``balancer.dispatch_kernel``).
    dispatch_kernel: str = "nccl"

    @classmethod
    def of(cls, scenario: Scenario) -> Wiring:
        """The wiring of the scenario's system, from its registered capabilities only: its
        own predictor (``balancer.override_predictor`` replaces it explicitly), dispatch
        (unless ``balancer.dispatch`` names one) and stages."""
        bal = scenario.balancer
        system = moe_system(bal.policy)
        caps = system.capabilities
        predictor = caps.predictor
        override = bal.override_predictor
        if override is not None:
            if caps.predictor is None:
                raise InputError("balancer.override_predictor", override,
                                 f"none for {bal.policy} (it plans without a prediction)")
            predictor = override
        dispatch = caps.dispatch if bal.dispatch == "auto" else bal.dispatch
        if bal.dispatch_kernel != "nccl" and dispatch == "allgather":
            raise InputError("balancer.dispatch_kernel", bal.dispatch_kernel,
                             f"nccl with AllGather dispatch ({bal.policy}: balancer.dispatch="
                             f"{bal.dispatch}); DeepEP's kernels drive an All2All")
        return cls(
            policy=bal.policy,
            predictor=predictor,
            allgather=dispatch == "allgather",
            gpu_predict=predictor is not None and not predictor_kind(predictor).on_cpu,
            cpu_predict=predictor is not None and predictor_kind(predictor).on_cpu,
            prefetch=caps.prefetch,
            fetch=caps.fetch,
            cpu_plan=caps.cpu_plan,
            two_stage=caps.two_stage,
            overridden=override is not None,
            dispatch_kernel=bal.dispatch_kernel,
        )

    @property
    def predictor_label(self) -> str | None:
        """The predictor as results name it: ``"lookahead (override)"`` when overridden."""
        if self.predictor is None or not self.overridden:
            return self.predictor
        return f"{self.predictor} (override)"

    @property
    def dispatch_after_plan(self) -> bool:
        """All2All needs the destinations, so it waits for a CPU plan when there is one."""
        return self.cpu_plan and not self.allgather

    @property
    def remote_after_plan(self) -> bool:
        return self.two_stage


@dataclass(frozen=True)
class BatchPlanner:
    """Routing source, predictor and static layouts of one run (``rng``: the batches'
    stream)."""

    scenario: Scenario
    setup: MoeSetup
    wiring: Wiring
    batches: int
    router: RouterModel | None
    source: Sequence[RoutingTrace] | RoutingTrace | None
    predictor: Predictor | None
    static_layout: np.ndarray | None
    rng: np.random.Generator
    timer: Callable[[], float] | None

    @classmethod
    def build(
        cls,
        scenario: Scenario,
        gpus: int,
        rng: np.random.Generator,
        traces: Sequence[RoutingTrace] | None = None,
        gpus_per_node: int = 0,
        draws_only: bool = False,
    ) -> BatchPlanner:
        """The run's planner, drawing its profile and its batches from two children of
        ``rng`` (:func:`routing_streams`). ``draws_only``: a planner that only draws batches
        (a helper process, the trace cache), built without the profile, predictor or static
        layout, which such a planner never uses."""
        m, w, bal = scenario.model, scenario.workload, scenario.balancer
        routing = w.routing
        spec = routing if routing is not None else RoutingSpec()
        moe_layers = m.layers - m.dense_layers
        router = None
        source: Sequence[RoutingTrace] | RoutingTrace | None = traces
        batches = len(traces) if traces else w.batches
        for given in traces or ():
            check_experts("traces", given.experts, m.experts, moe_layers, m.top_k)
        if traces is None and spec.trace:
            real = load_trace(resolve_trace(spec.trace), m.experts, moe_layers, m.top_k,
                              w.seq_len)
            source, batches = real, -(-real.requests // w.batch)
        if not isinstance(source, RoutingTrace):  # generated data: profile from the model
            router = RouterModel.build(m.name, m.experts, moe_layers, m.top_k, spec)
        wiring = Wiring.of(scenario)
        static = moe_system(bal.policy).capabilities.replication == "static"
        needs_profile = static or (wiring.predictor is not None
                                   and predictor_kind(wiring.predictor).needs_profile)
        profile_rng, batch_rng = routing_streams(rng)
        needed = needs_profile and not draws_only
        profile = profile_trace(scenario, router, source, profile_rng) if needed else None
        predictor = None
        if wiring.predictor is not None and not draws_only:
            predictor = make_predictor(wiring.predictor, m.name, moe_layers, bal.accuracy,
                                       bal.error_bias, profile)
        layout = None
        if static and not draws_only:
            assert profile is not None
            layout = rebalance_experts(profile.expert_load(), m.experts + bal.redundant_experts,
                                       1, 1, gpus)[0]
        setup = MoeSetup(static_home(m.experts, gpus), bal.slots, bal.alpha, bal.shard_tolerance,
                         m.hidden * m.dtype_bytes, expert_bytes(m), gpus_per_node)
        timer = time.perf_counter if bal.cpu_time == "measured" else None
        return cls(scenario, setup, wiring, batches, router, source, predictor, layout,
                   batch_rng, timer)

    def trace(self, b: int) -> RoutingTrace:
        """Routing of batch ``b`` (generated from the stream, or sliced from a real trace)."""
        w = self.scenario.workload
        if isinstance(self.source, RoutingTrace):
            return slice_requests(self.source, b * w.batch, (b + 1) * w.batch)
        if self.source is not None:
            return self.source[b]
        assert self.router is not None
        spec = w.routing or RoutingSpec()
        stream = w.batch * self.batches
        datasets = request_datasets(spec.dataset, w.batch, b * w.batch, stream, self.rng)
        return generate_trace(self.router, batch_lengths(w.seq_len, w.batch), datasets, self.rng)

    def plan(
        self, routed: np.ndarray, origin: np.ndarray, predicted: np.ndarray | None, layer: int
    ) -> MoeLayerPlan:
        layout = None if self.static_layout is None else self.static_layout[layer]
        inputs = PlanInputs(predicted, layout, self.timer)
        return self.system.plan(routed, origin, self.setup, inputs)

    @property
    def system(self) -> MoeSystem:
        return moe_system(self.wiring.policy)


def resolve_trace(ref: str) -> str:
    found = resolve_path(ref, ROOT, "workloads", (".npz",))
    if found is None:
        raise InputError("workload.routing.trace", ref, "an existing .npz file")
    return str(found)


def slice_requests(trace: RoutingTrace, lo: int, hi: int) -> RoutingTrace:
    keep = (trace.request >= lo) & (trace.request < hi)
    return RoutingTrace.of_layers(trace.by_layer[:, keep], trace.request[keep] - lo,
                                  trace.dataset[keep], trace.num_experts)


def routing_streams(rng: np.random.Generator) -> tuple[np.random.Generator, np.random.Generator]:
    """The profiling sample's stream and the served batches' stream: two children of a run's
    routing stream, so drawing either never moves the other. A run whose systems need no
    profile draws none, and a helper drawing only the batches skips nothing."""
    profile, batches = rng.spawn(2)
    return profile, batches


def profile_trace(
    scenario: Scenario,
    router: RouterModel | None,
    source: Sequence[RoutingTrace] | RoutingTrace | None,
    rng: np.random.Generator,
) -> RoutingTrace:
    """The profiling sample EPLB and Lina learn from: a separate draw of the same data (from
    the profile's own stream, :func:`routing_streams`), or the whole file for a real trace."""
    if router is None:
        assert isinstance(source, RoutingTrace)
        return source
    w = scenario.workload
    spec = w.routing or RoutingSpec()
    n = spec.profile_requests
    datasets = request_datasets(spec.dataset, n, 0, n, rng)
    return generate_trace(router, batch_lengths(w.seq_len, n), datasets, rng)


@dataclass(frozen=True)
class LayerRecord:
    seconds: float
    exposed: dict[str, float]
    span: dict[str, float]
    load_ratio: float  # R = max / mean GPU load
    accuracy: float | None
    replicas: int
    wasted: int
    replica_pairs: int
    pairs: int
    iterations: int
    cpu_wall: float
    bytes: dict[str, float]
    #: (stage name, GPU or None for group-wide, start, end) of every stage (for traces)
    stages: tuple[tuple[str, int | None, float, float], ...] = ()


def with_noise(c: LayerCosts, f: np.ndarray) -> LayerCosts:
    """Apply per-GPU slowdown factors ``f[5, G]`` to the compute stages (and their kernels:
    the pre-gate kernels by ``f[0]``, the gate's by ``f[1]``, the shared experts and the
    un-permute by ``f[3]``)."""
    block = c.block
    if block is not None:
        block = block.scaled(PRE_GATE, f[0]).scaled(GATE, f[1]).scaled(
            ("shared_experts", *TAIL), f[3])
    return dataclasses.replace(
        c, attention=c.attention * f[0], gate=c.gate * f[1], predict=c.predict * f[2],
        moe_local=c.moe_local * f[3], moe_remote=c.moe_remote * f[4], block=block,
    )


def kernel_parts(c: LayerCosts, names: tuple[str, ...], g: int) -> tuple[tuple[str, float], ...]:
    """GPU ``g``'s kernels of ``names`` (none when the costs carry no block breakdown)."""
    return c.block.parts(names, g) if c.block is not None else ()


def local_parts(c: LayerCosts, g: int) -> tuple[tuple[str, float], ...]:
    """MoE_local's kernels: the shared experts, then the local routed experts."""
    if c.block is None:
        return ()
    shared = float(c.block.seconds["shared_experts"][g])
    return (("shared_experts", shared), ("moe_local", float(c.moe_local[g]) - shared))


def build_graph(
    wiring: Wiring, c: LayerCosts, prefetched: list[Stage] | None, nxt: LayerCosts | None,
) -> tuple[list[Stage], Stage, list[Stage] | None]:
    """Stages of one layer (and the copies it issues for the next layer)."""
    gpus = range(c.attention.size)
    att = [Stage("attention", g, c.attention[g], parts=kernel_parts(c, PRE_GATE, g))
           for g in gpus]
    gate = [Stage("gate", g, c.gate[g], [att[g]], parts=kernel_parts(c, GATE, g))
            for g in gpus]
    pred = [Stage("prediction", g, c.predict[g], [gate[g]]) for g in gpus] if wiring.gpu_predict \
        else gate
    stages = att + gate + (pred if wiring.gpu_predict else [])
    plan_ready: list[Stage] = []
    if wiring.cpu_plan:
        cpu = Stage("sharding_cpu", None, c.cpu, list(gate))
        meta = Stage("metadata", None, c.metadata, [cpu])
        stages += [cpu, meta]
        plan_ready = [meta]
    disp = Stage("dispatch", None, 0.0,
                 list(gate) + (plan_ready if wiring.dispatch_after_plan else []), c.dispatch)
    stages.append(disp)
    local, remote = [], []
    for g in gpus:
        deps = [pred[g]] if wiring.two_stage else [disp]
        if prefetched is not None:
            deps.append(prefetched[g])
        local.append(Stage("moe_local", g, c.moe_local[g], deps, parts=local_parts(c, g)))
        after = [local[g], disp] + (plan_ready if wiring.remote_after_plan else [])
        if wiring.fetch and c.copy[g] > 0:
            # HarMoEny: the fetched experts' weights stream from host memory over the GPU's
            # own PCIe link (not its NVLink port) while its resident experts compute.
            fetch = Stage("replica_copy", g, c.copy[g], list(plan_ready))
            stages.append(fetch)
            after.append(fetch)
        remote.append(Stage("moe_remote", g, c.moe_remote[g], after))
    combine = Stage("combine", None, 0.0, list(remote), c.combine)
    # Every GPU sums its tokens' top-k outputs once combine has returned them; the layer
    # ends with the slowest (the next block starts on every GPU at once).
    tail = Stage("unpermute", None, c.tail, [combine])
    stages += local + remote + [combine, tail]
    issued = None
    if nxt is not None:
        ready: list[Stage] = list(pred)
        if wiring.cpu_predict:
            lookup = Stage("prediction", None, c.lookup, list(gate))
            stages.append(lookup)
            ready = [lookup]
        # The host plans the next layer's replicas from the prediction (a CPU thread of its
        # own: assumption), then the copies are issued once this layer's dispatch is done, so
        # they overlap the grouped GEMMs (the paper's schedule) and may contend with combine.
        replan = Stage("replication_cpu", None, nxt.replan, ready)
        stages.append(replan)
        issued = [Stage("replica_copy", g, 0.0, [replan, disp], nxt.copies[g]) for g in gpus]
        stages += issued
    return stages, tail, issued


def run_batch(
    env: Any,
    net: NetworkModel,
    wiring: Wiring,
    planner: BatchPlanner,
    trace: RoutingTrace,
    shape: BatchShape,
    costs_of: Callable[[MoeLayerPlan, np.ndarray], LayerCosts],
    variance: VarianceModel,
    rngs: tuple[np.random.Generator, np.random.Generator],
    batch: int,
    keep_stages: bool,
) -> list[LayerRecord]:
    """Plan, cost and execute every MoE layer of one batch (``rngs``: prediction, noise;
    ``keep_stages``: each record lists its stages, for a timeline)."""
    pred_rng, noise_rng = rngs
    gpus = range(shape.tokens.size)
    predictor = planner.predictor
    plans, costs, accuracy = [], [], []
    for layer in range(trace.layers):
        routed = trace.layer(layer)
        predicted = None
        if predictor is not None:
            predicted, agreement = predictor.predict(trace, layer, pred_rng)
            accuracy.append(agreement)
        plan = planner.plan(routed, shape.origin, predicted, layer)
        noise = variance.factors(noise_rng, np.arange(shape.tokens.size), 5, batch)
        plans.append(plan)
        costs.append(with_noise(costs_of(plan, routed), noise))
    prefetched = None
    if wiring.prefetch:  # layer 0's replicas: copied as the batch starts
        prefetched = [Stage("replica_copy", g, 0.0, [], costs[0].copies[g]) for g in gpus]
        for s in prefetched:
            launch(env, s, net)
    layers: list[tuple[list[Stage], float, float, dict[str, float]]] = []
    for layer, c in enumerate(costs):
        nxt = costs[layer + 1] if wiring.prefetch and layer + 1 < len(costs) else None
        stages, last, issued = build_graph(wiring, c, prefetched, nxt)
        if layer == 0 and prefetched is not None:
            stages += prefetched
        start = env.now
        for s in stages:
            if s.done is None:
                launch(env, s, net)
        env.run(until=last.done)
        layers.append((stages, start, env.now - start, critical_exposure(last, start)))
        prefetched = issued
    # Spans last: a copy issued in layer l ends during layer l+1.
    return [
        layer_record(plan, c, stages, start, seconds, exposed, accuracy[i] if accuracy else None,
                     keep_stages)
        for i, (plan, c, (stages, start, seconds, exposed)) in enumerate(
            zip(plans, costs, layers, strict=True))
    ]


def layer_record(
    plan: MoeLayerPlan, c: LayerCosts, stages: list[Stage], start: float, seconds: float,
    exposed: dict[str, float], accuracy: float | None, keep_stages: bool,
) -> LayerRecord:
    return LayerRecord(
        seconds=seconds,
        exposed=exposed,
        span=stage_spans(stages, start),
        load_ratio=plan.load_ratio,
        accuracy=accuracy,
        replicas=plan.replica_count,
        wasted=plan.wasted_replicas,
        replica_pairs=plan.replica_pairs,
        pairs=int(plan.load.sum()),
        iterations=plan.sharding_iterations,
        cpu_wall=plan.cpu_wall_s or 0.0,
        bytes={"dispatch": c.dispatch_bytes, "combine": c.combine_bytes,
               "replica_copy": c.copy_bytes, "metadata": c.metadata_bytes,
               "routing_d2h": c.routing_bytes},
        stages=tuple((name, s.gpu, a, b) for s in stages for name, a, b in s.pieces())
        if keep_stages else (),
    )
