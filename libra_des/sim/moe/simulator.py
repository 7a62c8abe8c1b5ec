"""MoE prefill under expert parallelism: SGLang, EPLB, Lina, HarMoEny and Libra (docs/model.md B).

``run_moe`` runs ``workload.batches`` prefill batches of ``workload.batch`` requests
through every layer of the model on an EP group. Per MoE layer it builds the system's plan
from the batch's routing (and, where the system predicts, the predicted routing), costs every
stage, and executes the stage graph in SimPy (``libra_des.sim.moe.layer``), where replica
copies on the copy engine contend with dispatch and combine for each GPU's link. The network
model is the one ``fidelity`` names in :mod:`libra_des.sim.network.models`
(:func:`network_factory`): ``fast`` times dispatch, combine and copies with the alpha-beta
cost model on one processor-sharing port per GPU; ``detailed`` runs them as flows on the
topology (max-min fair link sharing, the collective algorithm's transfer DAG). Compute, CPU
planning and host fetches are timed alike in both.

System designs (what runs where, what waits for what):

* SGLang: static placement; All2All dispatch after the gate; one grouped GEMM; combine.
* EPLB: SGLang plus ``redundant_experts`` static replicas per layer placed by DeepSeek's
  algorithm from a profiling sample of the same data; pairs split evenly over copies.
* Lina: path-table prediction and replica planning on the CPU (hidden while the layer
  lasts); replicas of predicted-hot experts copied one layer ahead on the copy engine; pairs
  split evenly over copies.
* HarMoEny: routing to the CPU, greedy moves, metadata back, then All2All dispatch; the
  experts a GPU lacks stream from host memory over its PCIe link while its resident experts
  compute (``moe_local``), and their GEMMs (``moe_remote``) wait for the fetch.
* Libra: lookahead prediction (one extra gate GEMM), locality-aware replicas planned on the
  CPU and copied one layer ahead (double-buffered), two-stage execution: MoE_local starts
  right after the gate while AllGather dispatch and CPU sharding run; MoE_remote waits for all
  three. Across nodes, replica placement and sharding prefer GPUs of the same node.

The run returns what it measured (:class:`MoeRecord`); its ``result.json`` is built in
:mod:`libra_des.results.moe_metrics`. Every stage's cost provenance (measured / borrowed /
assumed) is listed in the result under ``cost_sources`` (``sim/moe/cpu.py``); host (CPU)
stage prices and their sources are in ``sim/moe/host.py`` and in the result under
``host_stages``.

Batches are served closed-loop (a batch's requests arrive as the previous batch ends), so a
request's TTFT is its batch's prefill time. Embedding and LM head are not modelled.

Determinism: results depend only on the scenario and ``rng`` except the fields named in
:data:`WALL_CLOCK_FIELDS`; with ``balancer.cpu_time: measured`` the CPU planning time is the
wall-clock of our own sharding code, so every time field then varies run to run.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict, Unpack

import numpy as np
import simpy
from rich.progress import Progress

from libra_des.config import MoeScenario as Scenario
from libra_des.hardware.collectives import deepep
from libra_des.hardware.compute.interference import overlap_model, p2p_channels, port_share
from libra_des.hardware.costs import CostModel, comm_overrides
from libra_des.hardware.fabric.routing import Routing
from libra_des.hardware.fabric.topology import Topology, load_topology
from libra_des.hardware.profiles.profile import Profile, load_profile
from libra_des.hardware.variance.model import VarianceModel
from libra_des.plan.moe import MoeLayerPlan
from libra_des.sim.moe import batch as moe_policy
from libra_des.sim.moe import setup as moe_setup
from libra_des.sim.moe.batch import (
    BatchPlanner,
    LayerRecord,
    Wiring,
    routing_streams,
    run_batch,
)
from libra_des.sim.moe.block import NON_EXPERT, PRE_GATE
from libra_des.sim.moe.costs import (
    LayerCosts,
    StageCoster,
    batch_shape,
    layer_costs,
)
from libra_des.sim.moe.layer import Contention, CountingEnvironment, SharedLink
from libra_des.sim.moe.overlap import Prefetch, serve
from libra_des.sim.moe.setup import check_memory, ep_group, system_kernel
from libra_des.sim.network import models as network_models
from libra_des.sim.network.model import NetworkModel
from libra_des.sim.network.models import NetworkSetup
from libra_des.workload import routing as routing_module
from libra_des.workload import sampling, trace_cache, uniform_kernel
from libra_des.workload.routing import RoutingTrace

#: Result fields measured with the host's clock (excluded from determinism checks).
WALL_CLOCK_FIELDS = ("wall_s", "cpu_sharding_wall_s")
STAGES = (
    *NON_EXPERT, "prediction", "replica_copy", "dispatch", "moe_local",
    "sharding_cpu", "metadata", "moe_remote", "combine", "replication_cpu",
)


@dataclass
class RunTotals:
    """Accumulators over every batch and MoE layer."""

    layer_s: list[float] = field(default_factory=list)
    batch_s: list[float] = field(default_factory=list)
    dense_s: float = 0.0
    exposed: dict[str, float] = field(default_factory=dict)
    span: dict[str, float] = field(default_factory=dict)
    load_ratio: list[list[float]] = field(default_factory=list)  # R per [batch][layer]
    accuracy: list[float] = field(default_factory=list)
    replicas: int = 0
    wasted: int = 0
    replica_pairs: int = 0
    pairs: int = 0
    iterations: list[int] = field(default_factory=list)
    cpu_wall: float = 0.0
    bytes: dict[str, float] = field(default_factory=dict)
    tokens: int = 0
    requests: list[int] = field(default_factory=list)
    #: When not None, every stage as (batch, layer, name, gpu, start, end), for the trace.
    timeline: list[tuple[int, int, str, int | None, float, float]] | None = None

    def add(self, rec: LayerRecord) -> None:
        if self.timeline is not None:
            batch, layer = len(self.load_ratio) - 1, len(self.load_ratio[-1])
            self.timeline += [(batch, layer, *stage) for stage in rec.stages]
        self.layer_s.append(rec.seconds)
        for name, value in rec.exposed.items():
            self.exposed[name] = self.exposed.get(name, 0.0) + value
        for name, value in rec.span.items():
            self.span[name] = self.span.get(name, 0.0) + value
        self.load_ratio[-1].append(rec.load_ratio)
        if rec.accuracy is not None:
            self.accuracy.append(rec.accuracy)
        self.replicas += rec.replicas
        self.wasted += rec.wasted
        self.replica_pairs += rec.replica_pairs
        self.pairs += rec.pairs
        self.iterations.append(rec.iterations)
        self.cpu_wall += rec.cpu_wall
        for name, value in rec.bytes.items():
            self.bytes[name] = self.bytes.get(name, 0.0) + value


@dataclass
class MoeRun:
    """Everything one run needs between batches (one SimPy environment for the whole run)."""

    scenario: Scenario
    coster: StageCoster
    planner: BatchPlanner
    wiring: Wiring
    variance: VarianceModel
    rngs: tuple[np.random.Generator, np.random.Generator]  # prediction, noise
    network: Callable[[simpy.Environment], NetworkModel]
    env: CountingEnvironment = field(default_factory=CountingEnvironment)
    net: NetworkModel | None = None

    def __post_init__(self) -> None:
        self.net = self.network(self.env)

    def batch(self, b: int, totals: RunTotals) -> None:
        """Dense layers (per-GPU, no communication), then every MoE layer of batch ``b``."""
        sc, coster, env = self.scenario, self.coster, self.env
        trace = self.planner.trace(b)
        shape = batch_shape(trace.request_lengths(), trace.request, coster.gpus,
                            sc.parallelism.tp)
        block = coster.block(shape)
        attention = block.total(PRE_GATE)
        measured = sc.balancer.cpu_time == "measured"
        start = env.now
        dense = float((attention + coster.dense_ffn(shape)).max()) * sc.model.dense_layers
        env.run(until=env.timeout(dense))

        def costs_of(plan: MoeLayerPlan, routed: np.ndarray) -> LayerCosts:
            return layer_costs(coster, shape, plan, self.wiring, block, measured, routed)

        totals.load_ratio.append([])
        assert self.net is not None
        for rec in run_batch(env, self.net, self.wiring, self.planner, trace, shape, costs_of,
                             self.variance, self.rngs, b, totals.timeline is not None):
            totals.add(rec)
        totals.dense_s += dense
        totals.batch_s.append(env.now - start)
        totals.tokens += trace.tokens
        totals.requests.append(trace.requests)


@dataclass(frozen=True)
class MoeRecord:
    """What one MoE prefill run measured, for its result (``results/moe_metrics.py``)."""

    scenario: Scenario
    wiring: Wiring
    totals: RunTotals
    events: int  # SimPy events processed
    cost: CostModel
    coster: StageCoster
    gpus: int  # of the EP group
    gpus_per_node: int
    layout: dict[str, Any]  # Topology.layout() of the run's fabric
    #: (compute seconds slowed over the run, kernel factor, collective factor) when
    #: ``overlap.interference`` is on; None: overlap free.
    interference: tuple[float, float, float] | None = None


class RunOptions(TypedDict, total=False):
    """:func:`run_moe`'s optional arguments (by keyword), which ``simulate_moe`` passes on."""

    progress: bool
    traces: Sequence[RoutingTrace] | None
    timeline: list[tuple[int, int, str, int | None, float, float]] | None
    prefetch: Prefetch
    profile: Profile | None


def run_moe(
    scenario: Scenario, rng: np.random.Generator, **options: Unpack[RunOptions]
) -> MoeRecord:
    """Simulate MoE prefill for ``scenario``; returns what it measured (the result dict is
    :func:`libra_des.results.moe_metrics.simulate_moe`'s).

    ``traces`` (optional) replaces the routing source with ready batches (benchmarks reuse
    one generated trace across policies and accuracies). ``timeline`` (optional) is filled
    with every stage's (batch, layer, name, GPU, start, end) for a trace. ``prefetch``: draw
    generated batches meanwhile in a thread (``"thread"``, ``sim.moe.overlap``) or a helper
    process (True or ``"process"``, ``sim.moe.prefetch``), the same results either way;
    None: ``overlap.serve``'s rule; False: in the run. ``profile``: the scenario's, already
    loaded (None: loaded here).
    """
    progress, traces = options.get("progress", False), options.get("traces")
    timeline, prefetch = options.get("timeline"), options.get("prefetch")
    profile = options.get("profile")
    net = scenario.network
    topo = load_topology(scenario.topology, scenario.topology_params).routed(
        Routing.sample(net.routing, net.ecmp_seed))
    group = ep_group(scenario, topo)
    check_memory(scenario, group.gpus, topo.spec.gpu)
    fabric = topo.fabric()
    prof = load_profile(scenario.profile) if profile is None else profile
    cost = CostModel(prof, fabric, True, comm_overrides(scenario))
    grouped = system_kernel(scenario.balancer.policy, scenario.model.dtype)
    coster = StageCoster(cost, fabric, scenario.model, group.gpus, grouped)
    trace_rng, pred_rng, noise_rng, var_rng = rng.spawn(4)
    if traces is None:
        traces = shared_traces(scenario, group.gpus, trace_rng)
    start = copy.deepcopy(trace_rng)  # the stream before the planner draws (for a helper)
    planner = BatchPlanner.build(scenario, group.gpus, trace_rng, traces, group.gpus_per_node)
    variance = VarianceModel.build(scenario.variance, group.gpus, var_rng, group.gpus_per_node)
    with ExitStack() as helper, Progress(transient=True, disable=not progress) as bar:
        run = MoeRun(
            scenario, coster, serve(planner, start, group.gpus, helper, prefetch),
            Wiring.of(scenario), variance, (pred_rng, noise_rng),
            network_factory(scenario.fidelity, topo, cost, group.gpus, variance),
        )
        cont = None
        if scenario.overlap.interference == "on":
            model = overlap_model(cost, scenario.comm.sm_per_channel, scenario.comm.channels)
            channels = p2p_channels(cost, group.gpus)
            ep_kernel = deepep.KERNELS.get(scenario.balancer.dispatch_kernel)
            if ep_kernel is not None:  # DeepEP holds its own SMs (none in flight at low latency)
                model = replace(model, sm_per_channel=1 if ep_kernel.sms else 0,
                                channels=max(ep_kernel.sms, 1), taken_share=None)
            kernel, comm = model.factors(channels, port_share(model, cost))
            cont = run.env.contention = Contention(run.env, kernel)
        totals = RunTotals(timeline=timeline)
        task = bar.add_task("prefill batches", total=run.planner.batches)
        for b in range(run.planner.batches):
            run.batch(b, totals)
            bar.advance(task)
    slowed = None if cont is None else (float(cont.slowed_s), kernel, comm)
    return MoeRecord(scenario, run.wiring, totals, run.env.processed, cost, coster, group.gpus,
                     group.gpus_per_node, topo.layout(), slowed)


def network_factory(
    fidelity: str, topology: Topology, cost: CostModel, gpus: int, variance: VarianceModel
) -> Callable[[simpy.Environment], NetworkModel]:
    """The run's registered network model (module docstring), offered one processor-sharing
    port per GPU of the EP group (the α-β model shares them; the flow model shares links)."""
    model = network_models.get(fidelity)
    setup = NetworkSetup(topology, cost, variance, lambda env: [SharedLink(env)
                                                                 for _ in range(gpus)])

    def make(env: simpy.Environment) -> NetworkModel:
        return model.build(env, setup)

    return make


def shared_traces(
    scenario: Scenario, gpus: int, rng: np.random.Generator
) -> list[RoutingTrace] | None:
    """The generated routing batches from the on-disk cache (see ``workload.trace_cache``),
    or None when caching is off or the routing comes from a trace file.

    Made, on a miss, exactly as the run's own planner would draw them (from a copy of its
    stream, which stays untouched), so a run gives the same result with or without the cache.
    """
    directory = trace_cache.cache_dir()
    routing = scenario.workload.routing
    if directory is None or (routing is not None and routing.trace):
        return None

    def make() -> list[RoutingTrace]:
        planner = BatchPlanner.build(scenario, gpus, copy.deepcopy(rng), draws_only=True)
        return [planner.trace(b) for b in range(planner.batches)]

    parts = {
        "model": scenario.model.model_dump(mode="json"),
        "workload": scenario.workload.model_dump(mode="json"),
        "gpus": gpus,
        "code": trace_cache.source_fingerprint(
            (moe_policy, moe_setup, routing_module, sampling, uniform_kernel)),
    }
    # Keyed by the stream the batches are drawn from (a child of ``rng``, left untouched).
    batch_rng = routing_streams(copy.deepcopy(rng))[1]
    return trace_cache.cached_traces(directory, batch_rng, parts, make)
