"""One or more training steps of DP x PP x CP long-context training.

Describe -> elaborate -> run: the scenario (describe) is elaborated into a topology, a cost
model, a variance model and, per step, a :class:`~libra_des.plan.step.StepPlan`; the step's
timeline is then walked over precomputed, noise-folded op durations
(:mod:`libra_des.sim.training.stagetimes`) by the pipeline's recurrence
(:mod:`libra_des.sim.training.pipeline`). A network model that replays training
(``detailed``: the flow-level network; :mod:`libra_des.sim.network.models`) replaces the
analytic attention exchange with per-chunk traffic on it (:mod:`libra_des.sim.training.detailed`).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import simpy

from libra_des.base.startup import long_lived_run
from libra_des.config import NetworkSpec, TrainingParallelism
from libra_des.config import TrainingScenario as Scenario
from libra_des.errors import InputError
from libra_des.hardware.collectives.ecmp import stage_overlap_warning
from libra_des.hardware.compute.interference import (
    OverlapModel,
    overlap_model,
    p2p_channels,
    port_share,
)
from libra_des.hardware.costs import CostModel, comm_overrides
from libra_des.hardware.fabric.rates import Fabric
from libra_des.hardware.fabric.routing import Routing
from libra_des.hardware.fabric.topology import Topology, load_topology
from libra_des.hardware.profiles.profile import Profile, load_profile
from libra_des.hardware.variance.model import VarianceModel
from libra_des.plan.step import (
    StepPlan,
    balancer_of,
    build_step_plan,
    pipeliner_chunks,
    pool_size_of,
)
from libra_des.sim.network import models as network_models
from libra_des.sim.network.model import NetworkModel
from libra_des.sim.network.models import Fidelity, NetworkSetup, flow_topology
from libra_des.sim.training import first_look
from libra_des.sim.training.attribution import StepInputs, StepParts, forward_masks, step_parts
from libra_des.sim.training.detailed import DetailedPipelineSim, flow_times
from libra_des.sim.training.ecmp import Recorder, recording, replaying
from libra_des.sim.training.memory import (
    MemoryReport,
    PlanFootprint,
    check_memory,
    check_memory_floor,
    footprint,
    shard_tokens_of,
    stage_memory,
)
from libra_des.sim.training.opcost import (
    LinearCosts,
    SlotAttention,
    backward_traffic,
    linear_costs,
    slot_attention,
)
from libra_des.sim.training.overlap import (
    Factors,
    Ledger,
    bucket_times,
    exchange_factors,
    handoff_durations,
    stretched_buckets,
)
from libra_des.sim.training.pipeline import Pipeline, PipelineRun, PipelineSim
from libra_des.sim.training.schedules import Op, Schedule, build_schedule
from libra_des.sim.training.stagetimes import DeviceTimes, Layout, device_times
from libra_des.sim.training.step_checks import (
    check_linear_tokens,
    check_step,
    executed_pair_heads,
    slot_tokens,
)
from libra_des.sim.training.tap_autotune import Ranking, resolve_knobs
from libra_des.workload.packing import PackedBatch, make_stream


@dataclass(frozen=True)
class Cluster:
    """The elaborated hardware side of a scenario."""

    topology: Topology
    cost: CostModel
    variance: VarianceModel
    overlap: OverlapModel | None = None  # None: ``overlap.interference: off`` (free overlap)
    file_nodes: int | None = None  # the file's ``nodes:`` where the run resized it (else None)


@dataclass(frozen=True)
class StepRecord:
    """Everything measured in one step (consumed by :mod:`libra_des.results.metrics`)."""

    plan: StepPlan
    times: tuple[DeviceTimes, ...]
    run: PipelineRun
    step_time: float
    linear: LinearCosts
    p2p_seconds: np.ndarray  # [src stage, dst stage] hand-off seconds
    executed_pair_heads: tuple[float, float]  # (forward, backward) over all layers
    sim_seconds: float = 0.0  # wall clock inside SimPy (benchmarks only; not in results)
    memory: MemoryReport | None = None
    tap_autotune: dict[str, Any] | None = None  # the (H, B) ranking when knobs were auto
    comm_tiers: tuple[tuple[str, str], ...] = ()  # (op, curve tier) priced so far in the run
    comm_choices: tuple[tuple[str, Any], ...] = ()  # (op, NCCL algorithm/protocol/channels)
    fabric_layout: dict[str, Any] | None = None  # Topology.layout() of the run's cluster
    interference: Ledger | None = None  # seconds interference added (None: overlap free)
    #: The step under ECMP samples 1..K-1 (sample 0 is this record); see sim/training/ecmp.py.
    ecmp: tuple[StepRecord, ...] = ()
    ecmp_exact: bool = True  # whether every sample's record is exact (not a light replay)
    warnings: tuple[str, ...] = ()  # known fast/detailed disagreements for this shape
    notes: tuple[str, ...] = ()  # what the run did that the reader should know (no fault)
    parts: StepParts | None = None  # the step split into parts (sim/training/attribution.py)


def elaborate_cluster(
    scenario: Scenario, rng: np.random.Generator, profile: Profile | None = None
) -> Cluster:
    """Topology sized to the scenario, cost model from the profile (``profile``: the
    scenario's, already loaded), variance model."""
    need = scenario.parallelism.gpus
    params = dict(scenario.topology_params)
    topo = load_topology(scenario.topology, params)
    file_nodes = None
    if "nodes" not in params and topo.num_gpus != need and topo.gpus_per_node > 0:
        # Size a parametric fabric to the layout unless the scenario pins the node count.
        file_nodes = topo.nodes
        params["nodes"] = -(-need // topo.gpus_per_node)
        topo = load_topology(scenario.topology, params)
    if topo.num_gpus < need:
        raise InputError("topology_params.nodes", topo.nodes, f"enough nodes for {need} GPUs")
    topo = topo.routed(ecmp_routings(scenario.network)[0])
    # One pipeline stage's entities exchange in lockstep; other stages' exchanges are
    # staggered, so a leaf's uplinks are shared by the nodes of one stage (Fabric.busy_nodes).
    stage_nodes = -(-scenario.parallelism.dp * scenario.parallelism.cp // topo.gpus_per_node)
    fabric = replace(topo.fabric(), busy_nodes=stage_nodes)
    prof = load_profile(scenario.profile) if profile is None else profile
    cost = CostModel(prof, fabric, True, comm_overrides(scenario))
    if scenario.variance.enabled:
        variance = VarianceModel.build(scenario.variance, topo.num_gpus, rng, topo.gpus_per_node)
    else:
        variance = VarianceModel.none()
    overlap = None
    if scenario.overlap.interference == "on":
        overlap = overlap_model(cost, scenario.comm.sm_per_channel, scenario.comm.channels)
    return Cluster(topo, cost, variance, overlap, file_nodes)


def ecmp_routings(net: NetworkSpec) -> tuple[Routing, ...]:
    """The route choice of each ECMP sample (the scenario's ``network``; sample 0 routes the
    run itself)."""
    return tuple(Routing.sample(net.routing, net.ecmp_seed, k) for k in range(net.ecmp_samples))


def layout_of(scenario: Scenario) -> Layout:
    par = scenario.parallelism
    return Layout(par.dp, par.cp, pool_size_of(scenario), scenario.model.layers)


def sync_fn(
    scenario: Scenario, cluster: Cluster, schedule: Schedule, lin: LinearCosts,
    ledger: Ledger | None = None,
) -> Callable[[int, np.ndarray, np.ndarray], tuple[list[tuple[float, float]], float]]:
    """Bucketed gradient sync of one stage: one bucket per layer, overlapping the backward.

    Assumptions: attention, router and dense weights are replicated over DP x CP and reduced
    with one all-reduce per layer bucket over those GPUs; expert weights are sharded over the
    CP group (expert parallelism) and reduced over DP only, across the GPUs that hold the same
    CP rank (:func:`dp_ranks_per_node` gives how they sit on nodes). A bucket is ready on an
    entity when its layer's share of the entity's last backward op of that model chunk has
    run; buckets go one after another on the communication stream. With interference on
    (``ledger`` given), buckets take SMs from the backward beside them (``overlap.py``).
    """
    par, fab = scenario.parallelism, cluster.cost.fabric
    bucket_s, channels = 0.0, 0
    if not scenario.comm_free:
        bucket_s = all_reduce_s(cluster, lin.grad_bytes, par.dp * par.cp, fab.gpus_per_node)
        per_node = dp_ranks_per_node(par.dp, par.cp, par.pp, fab.gpus_per_node)
        bucket_s += all_reduce_s(cluster, lin.expert_grad_bytes, par.dp, per_node)
        channels = bucket_channels(cluster, lin.grad_bytes, par.dp * par.cp, fab.gpus_per_node)
    grad: Factors | None = None
    if ledger is not None and cluster.overlap is not None:
        model = cluster.overlap
        k, c = model.factors(channels or None, port_share(model, cluster.cost))
        grad = Factors(k, c)
    layout = layout_of(scenario)
    last_b = [last_backward_per_chunk(order) for order in schedule.orders]

    def sync(d: int, start: np.ndarray, fin: np.ndarray) -> tuple[list[tuple[float, float]], float]:
        ready: list[float] = []
        for i in last_b[d]:
            op = schedule.orders[d][i]
            n = layout.layers_of(schedule, d, op.chunk)
            frac = (np.arange(n) + 1) / n
            ready += list((start[:, i, None] + frac * (fin[:, i] - start[:, i])[:, None]).max(0))
        if grad is not None and ledger is not None:
            return stretched_buckets(ready, bucket_s, float(np.nanmax(fin)), grad, ledger)
        return bucket_times(sorted(ready), bucket_s)

    return sync


def bucket_channels(cluster: Cluster, nbytes: float, group: int, gpn: int) -> int:
    """Channels NCCL launches for one gradient bucket (0: none, or no tuner)."""
    if group <= 1 or nbytes <= 0:
        return 0
    return cluster.cost.collective("all_reduce", nbytes, group, max(1, min(gpn, group))).channels


def dp_ranks_per_node(dp: int, cp: int, pp: int, gpus_per_node: int) -> int:
    """Most members of one DP group (same stage and CP rank) that share a node.

    Placement as :class:`~libra_des.sim.training.stagetimes.Layout`:
    GPU id = (stage * dp + replica) *
    cp + cp_rank, so a DP group is every ``cp``-th GPU of its stage: ``gpus_per_node / cp``
    replicas per node when CP groups are smaller than a node, one per node otherwise. The
    busiest node over all groups sets the pace (uneven splits keep the largest count).
    """
    first = np.arange(pp)[:, None] * dp * cp + np.arange(min(cp, gpus_per_node))[None, :]
    ids = first[:, :, None] + np.arange(dp)[None, None, :] * cp
    nodes = ids // gpus_per_node
    return int(max(np.unique(row, return_counts=True)[1].max() for row in nodes.reshape(-1, dp)))


def all_reduce_s(cluster: Cluster, nbytes: float, group: int, gpus_per_node: int) -> float:
    """One all-reduce over ``group`` GPUs spread ``gpus_per_node`` per node (0 if trivial)."""
    if group <= 1 or nbytes <= 0:
        return 0.0
    per_node = max(1, min(gpus_per_node, group))
    try:
        return cluster.cost.collective("all_reduce", nbytes, group, per_node).seconds
    except InputError:
        # A layout the fabric cannot hold: name the scenario's fields, not the cost command's.
        need = f"a DP x CP layout that fits {cluster.cost.fabric.num_gpus} GPUs"
        raise InputError("parallelism", f"all-reduce over {group} GPUs", need) from None


def last_backward_per_chunk(order: tuple[Op, ...]) -> list[int]:
    """Index of each model chunk's last backward op (its gradients are final after it)."""
    last: dict[int, int] = {}
    for i, op in enumerate(order):
        if op.kind == "B":
            last[op.chunk] = i
    return [last[c] for c in sorted(last)]


def p2p_times(scenario: Scenario, cluster: Cluster, lin: LinearCosts) -> np.ndarray:
    """``[src, dst]`` seconds of an activation / gradient hand-off between two stages.

    One transfer per CP worker, all in parallel; worker 0 of stage ``d`` is GPU
    ``d * dp * cp``, so whether a boundary stays inside a node depends on the boundary.
    """
    par = scenario.parallelism
    out = np.zeros((par.pp, par.pp))
    if par.pp == 1 or scenario.comm_free:
        return out
    gpn = cluster.cost.fabric.gpus_per_node
    stride = par.dp * par.cp
    for src in range(par.pp):
        for dst in range(par.pp):
            if src != dst:
                same = (src * stride) // gpn == (dst * stride) // gpn
                # The slowest worker's route sets the hand-off (leaf-local or across the spine).
                slowest = slowest_pair(cluster.cost.fabric, src * stride, dst * stride, stride)
                out[src, dst] = float(cluster.cost.p2p(lin.act_bytes, same, slowest))
    return out


def slowest_pair(fabric: Fabric, src0: int, dst0: int, width: int) -> tuple[int, int]:
    """The first of the pairs (src0 + w, dst0 + w), w < width, with the lowest route rate."""
    w = np.arange(width)
    k = int(np.argmin(fabric.pair_bws(src0 + w, dst0 + w)))
    return src0 + k, dst0 + k


def simulate_step(
    scenario: Scenario,
    cluster: Cluster,
    plan: StepPlan,
    rng: np.random.Generator,
    step: int,
    watch: Callable[[float, float], None] | None = None,
    schedule: Schedule | None = None,
) -> StepRecord:
    """Cost the plan, fold in noise, and run the pipeline processes for one step
    (``schedule``: the run's, built once; None: built here)."""
    par = scenario.parallelism
    if schedule is None:
        schedule = schedule_of(scenario.parallelism)
    lin = replace(linear_costs(scenario, cluster.cost), token_share=token_share(scenario, plan))
    att = slot_attention(scenario, cluster.cost, plan)
    if scenario.comm_free:
        lin, att = free_comm(lin, att)
    layout = layout_of(scenario)
    ledger = None if cluster.overlap is None else Ledger()
    exch = None
    if cluster.overlap is not None and not scenario.comm_free:
        exch = exchange_factors(cluster.overlap, cluster.cost, layout.pool * par.cp)
    times = tuple(
        device_times(plan, schedule, d, lin, att, layout, (cluster.variance, rng, step), exch)
        for d in range(par.pp)
    )
    if ledger is not None:
        for t in times:
            ledger.add("pipeliner_exchange", float(t.interf_compute.mean(axis=0).sum()),
                       float(t.interf_comm.mean(axis=0).sum()))
    p2p = p2p_times(scenario, cluster, lin)
    sync = sync_fn(scenario, cluster, schedule, lin, ledger)
    sim: Pipeline
    fidelity = network_models.get(scenario.fidelity)
    recorders: list[Recorder] = []
    routings = ecmp_routings(scenario.network)
    planned = times

    def detailed(make: Callable[[simpy.Environment], NetworkModel]) -> DetailedPipelineSim:
        return DetailedPipelineSim(schedule, planned, plan, layout, make, lin.act_bytes, sync,
                                   backward_traffic(scenario.memory))

    if fidelity.replays_training:
        factory = network_factory(fidelity, cluster)
        if len(set(routings)) > 1:  # spray: one route set, whatever K
            width = par.dp * par.cp  # GPUs per stage (Layout's placement)
            routed = flow_topology(cluster.topology, cluster.cost)  # the network's routes
            factory = recording(factory, routed, routings, lambda g: g // width, recorders)
        sim = detailed(factory)
    else:
        width = layout.pool * par.cp
        durations = [t.duration for t in times]
        if ledger is not None and cluster.overlap is not None and par.pp > 1:
            model = cluster.overlap
            k, c = model.factors(p2p_channels(cluster.cost, 2), port_share(model, cluster.cost))
            durations = handoff_durations(durations, schedule, p2p, Factors(k, c), ledger)
        sim = PipelineSim(schedule, durations, p2p, lin.act_bytes * width, sync)
    sim.watch = watch  # a progress bar's hook (simulated seconds, share of ops done)
    began = time.perf_counter()
    run = sim.run()
    sim_wall = time.perf_counter() - began
    if isinstance(sim, DetailedPipelineSim):
        times = flow_times(times, sim)
    executed = executed_pair_heads(times, run, schedule)
    check_step(scenario, plan, schedule, run, executed)
    check_linear_tokens(scenario, plan, times, run, schedule)
    # The scheduler's planning bounds every sample's step alike (it does not depend on routes).
    sched = scheduler_seconds(scenario, plan)
    step_s = max(step_time_of(run), sched)
    split = StepInputs(planned, times, run, step_s, forward_masks(schedule),
                       fidelity.replays_training)
    rec = StepRecord(plan, times, run, step_s, lin, p2p, executed, sim_wall, interference=ledger,
                     parts=step_parts(scenario, cluster.cost, plan, lin, att, split))
    if not recorders or not recorders[0].settled().crossed:
        # One route set, or no flow meets a hashed choice: every sample is this one.
        return replace(rec, ecmp=(rec,) * (len(routings) - 1))
    record = recorders[0]
    samples = []
    for k in range(1, len(routings)):
        light = detailed(replaying(record, k))
        ran = light.run()
        samples.append(replace(rec, times=flow_times(planned, light), run=ran,
                               step_time=max(step_time_of(ran), sched)))
    return replace(rec, ecmp=tuple(samples), ecmp_exact=False)


def step_time_of(run: PipelineRun) -> float:
    """The step's end: the last op or the last gradient bucket, whichever is later."""
    return float(max(run.sync_end.max(), np.nanmax(run.finish)))


def scheduler_seconds(scenario: Scenario, plan: StepPlan) -> float:
    """Host seconds the balancer's scheduler spends planning one step (0: none).

    The scheduler plans the next step while this one runs, so a step lasts at least as long
    as its planning: the step time is the larger of the two.
    """
    bal = balancer_of(scenario)
    if bal.scheduler_ops is None:
        return 0.0
    servers = plan.pool_size * scenario.parallelism.cp
    return bal.scheduler_ops(plan.tiles, servers) * bal.scheduler_op_seconds


def token_share(scenario: Scenario, plan: StepPlan) -> np.ndarray | None:
    """Per-slot share of the padded length the linear work runs on (None: all padded)."""
    if not balancer_of(scenario).real_token_linear:
        return None
    return slot_tokens(scenario, plan) / float(plan.pool_size * scenario.workload.packed_length)


def fidelity_warnings(scenario: Scenario, cluster: Cluster) -> tuple[str, ...]:
    """Known disagreements of the chosen fidelity for this layout
    (hardware/collectives/ecmp.py)."""
    replays = network_models.get(scenario.fidelity).replays_training
    warning = stage_overlap_warning(cluster.cost.fabric, replays)
    return (warning,) if warning else ()


def resized_note(cluster: Cluster) -> str:
    """Say so where the run grew or shrank the topology file's ``nodes:`` to the layout."""
    if cluster.file_nodes is None:
        return ""
    topo = cluster.topology
    return (f"topology {topo.name}: nodes {cluster.file_nodes} in the file resized to "
            f"{topo.nodes} ({topo.num_gpus} GPUs) for the layout; set topology_params.nodes "
            "to pin it")


def network_factory(
    fidelity: Fidelity, cluster: Cluster
) -> Callable[[simpy.Environment], NetworkModel]:
    """The registered network model on the scenario's topology (no per-GPU ports: the
    replayed exchange shares links, not ports)."""
    setup = NetworkSetup(cluster.topology, cluster.cost, cluster.variance)

    def make(env: simpy.Environment) -> NetworkModel:
        return fidelity.build(env, setup)

    return make


def free_comm(lin: LinearCosts, att: SlotAttention) -> tuple[LinearCosts, SlotAttention]:
    """Zero every communication cost (closed-form bubble checks use this)."""
    zero = np.zeros_like
    redo_d, redo_r = att.recompute_dispatch, att.recompute_return
    return replace(lin, ep_comm_fwd=0.0, recompute_ep=0.0), replace(
        att,
        recompute_dispatch=None if redo_d is None else zero(redo_d),
        recompute_return=None if redo_r is None else zero(redo_r),
        dispatch_fwd=zero(att.dispatch_fwd),
        return_fwd=zero(att.return_fwd),
        dispatch_bwd=zero(att.dispatch_bwd),
        return_bwd=zero(att.return_bwd),
    )


@dataclass
class PreparedRun:
    """What a training run decides before its first simulated step: the cluster, every
    step's plan, the memory report, the TAP knobs chosen, the pipeline schedule (built once,
    read by every step, the memory model, the metrics and the trace). Every bad-input check
    of the run happens while preparing, so a command refuses a run before its progress bar
    starts."""

    scenario: Scenario
    cluster: Cluster
    schedule: Schedule
    plans: list[StepPlan]
    memory: MemoryReport
    tuned: dict[str, Any] | None
    noise_rng: np.random.Generator


def prepare_training(
    scenario: Scenario, rng: np.random.Generator, profile: Profile | None = None,
    floor_checked: bool = False,
) -> PreparedRun:
    """Elaborate the cluster and plan every step; ``rng`` seeds independent hardware, data and
    noise streams (the noise stream is kept for the steps). ``profile``: the scenario's,
    already loaded; ``floor_checked``: the scenario's elaboration already checked the memory
    floor on the first window (``kinds/training.elaborate``), so it is not asked again."""
    # Separate child streams for hardware, data and noise: turning noise on or off (or any
    # change in how many noise numbers a step draws) must not change the data a step sees.
    cluster_rng, data_rng, noise_rng = rng.spawn(3)
    cluster = elaborate_cluster(scenario, cluster_rng, profile)
    schedule = schedule_of(scenario.parallelism)
    # One look at the first window serves both early decisions: memory without any attention
    # buffers first, so a run that cannot fit fails before planning, then the ``auto`` TAP
    # knobs. The stream keeps that window for the first step (drawn once, not from a copy).
    # The elaboration's stream, first window peeked, when it checked the floor on it.
    kept = first_look.take(scenario) if floor_checked else None
    stream = kept if kept is not None else make_stream(scenario.workload, data_rng)
    window = stream.peek_window(scenario.parallelism.gbs)
    if not floor_checked:
        check_memory_floor(scenario, window, cluster.topology.spec.gpu, schedule)
    scenario, ranking = choose_tap_knobs(scenario, cluster, window, schedule)
    del window  # WLB-LLM repacks it: the stream's copy is dropped at the first step
    tuned = None if ranking is None else ranking.as_dict()
    plans = []
    queue = np.zeros(0, dtype=np.int64)
    for _ in range(scenario.steps):
        # Plans are pure and drawn from the data stream only, so planning every step first
        # lets the memory check refuse a run before any simulation.
        plans.append(build_step_plan(scenario, stream, queue))
        queue = plans[-1].deferred
    report = training_memory(scenario, cluster, plans, schedule)
    return PreparedRun(scenario, cluster, schedule, plans, report, tuned, noise_rng)


def simulate_training(
    scenario: Scenario, rng: np.random.Generator, progress: Callable[[int], None] | None = None,
    watch: Callable[[float, float], None] | None = None,
) -> list[StepRecord]:
    """Run ``scenario.steps`` steps; ``rng`` seeds independent hardware, data and noise streams."""
    return run_steps(prepare_training(scenario, rng), progress, watch)


def run_steps(
    prepared: PreparedRun, progress: Callable[[int], None] | None = None,
    watch: Callable[[float, float], None] | None = None,
) -> list[StepRecord]:
    """Simulate the prepared steps in order (``progress(step)`` after each)."""
    scenario, cluster, plans = prepared.scenario, prepared.cluster, prepared.plans
    records = []
    # The laid-out fabric and the fidelity's known disagreements are the run's, not a step's.
    layout, warnings = cluster.topology.layout(), fidelity_warnings(scenario, cluster)
    notes = tuple(n for n in (resized_note(cluster),) if n)
    # The elaborated objects live for the whole run (base/startup.long_lived_run).
    with long_lived_run():
        for step, plan in enumerate(plans):
            rec = simulate_step(scenario, cluster, plan, prepared.noise_rng, step, watch,
                                prepared.schedule)
            # Measured: the per-slot plans are no longer needed (metrics and trace read none).
            plans[step] = plan.without_slots()
            records.append(replace(rec, plan=plans[step], memory=prepared.memory,
                                   tap_autotune=prepared.tuned,
                                   comm_tiers=tuple(cluster.cost.tiers().items()),
                                   comm_choices=tuple(cluster.cost.choices().items()),
                                   fabric_layout=layout, warnings=warnings, notes=notes))
            if progress is not None:
                progress(step)
    return records


def resolved_scenario(scenario: Scenario) -> Scenario:
    """The scenario with ``auto`` TAP knobs replaced as a run of it replaces them.

    Uses the same seed streams as :func:`simulate_training` (hardware and data children).
    """
    bal = scenario.balancer
    if isinstance(bal.heads_split, int) and isinstance(bal.block_size, int):
        return scenario
    cluster_rng, data_rng, _noise = np.random.default_rng(scenario.seed).spawn(3)
    cluster = elaborate_cluster(scenario, cluster_rng)
    return choose_tap_knobs(scenario, cluster, first_window(scenario, data_rng))[0]


def first_window(scenario: Scenario, data_rng: np.random.Generator) -> PackedBatch:
    """The run's first GBS window, drawn from a copy of the data stream (it stays unused)."""
    stream = make_stream(scenario.workload, copy.deepcopy(data_rng))
    return stream.next_window(scenario.parallelism.gbs)


def schedule_of(par: TrainingParallelism) -> Schedule:
    """The op orders of the scenario's pipeline schedule (its ``parallelism``)."""
    return build_schedule(par.schedule, par.pp, par.microbatches, par.virtual_stages)


def memory_report(
    scenario: Scenario, cluster: Cluster, need: PlanFootprint, schedule: Schedule
) -> MemoryReport:
    return stage_memory(scenario, schedule, layout_of(scenario), need, cluster.topology.spec.gpu)


def choose_tap_knobs(
    scenario: Scenario, cluster: Cluster, window: PackedBatch, schedule: Schedule | None = None
) -> tuple[Scenario, Ranking | None]:
    """Resolve ``auto`` TAP knobs on the run's first window (a copy of the data stream)."""
    fits = memory_fits(scenario, cluster, window,
                       schedule_of(scenario.parallelism) if schedule is None else schedule)
    return resolve_knobs(scenario, cluster.cost, window, fits)


def training_memory(
    scenario: Scenario, cluster: Cluster, plans: list[StepPlan], schedule: Schedule
) -> MemoryReport:
    """Peak memory per stage; exits 2 (one line) when it does not fit, unless check: warn."""
    report = memory_report(scenario, cluster, footprint(plans, scenario.parallelism.cp),
                           schedule)
    check_memory(scenario, report)
    return report


def memory_fits(
    scenario: Scenario, cluster: Cluster, window: PackedBatch, schedule: Schedule
) -> Callable[[float], bool]:
    """Whether the run fits with a TAP candidate's remote buffers (for ``auto`` knobs)."""
    tokens = shard_tokens_of(window, scenario.parallelism.cp)
    chunks = pipeliner_chunks(scenario)

    def fits(remote: float) -> bool:
        need = PlanFootprint(tokens, remote, chunks)
        return not memory_report(scenario, cluster, need, schedule).oom

    return fits
