"""Host (CPU) stages of the MoE systems, priced as their serving stacks run them.

In the serving stack (SGLang and the systems built on it) the host stages are Python loops
over torch CPU tensors behind a device-to-host copy of the routing result. Each stage is a
:class:`HostStage`: how many Python loop iterations, torch ops (each pays the dispatcher's
per-call overhead), elements inside those ops, device-host copies, synchronisations after
which the GPU waits for a host launch, and kernel launches. :class:`HostPrices` prices one:
per-call costs from the profile's ``host`` block (``libra-des calibrate`` measures them on the
user's CPU) or the defaults below, measured the same way on the development host.

Structures (``G`` GPUs, ``E`` experts, ``T`` tokens, ``k`` top-k; per torch op, the count of
``libra_des.calibrate.host``'s implementation, whose calls ``tests/test_moe_cpu.py`` counts):

* greedy token moves (Libra's sharding of remote tokens, HarMoEny's moves), per layer: the
  ``[G, E]`` counts copied to the host (one copy: every GPU's row of ``E`` counts, the rows
  in parallel over the GPUs' own PCIe links); a clone and a row sum (``2 G E``
  elements); per move one loop iteration of :data:`MOVE_OPS` ops (argmax of the loads and of
  the source row, the holders' least load, four in-place updates, their ``.item()`` calls)
  over ``5 G + E`` elements: :func:`greedy_moves`.
* replica placement (Libra's replication, Lina's replica choice), per layer on the predicted
  counts (one copy): Libra's phase 1 (each GPU's most-requested experts it lacks) as one
  vectorised top-k (:data:`PHASE1_OPS` ops over ``2 G E + 2 V`` elements for ``V`` replicas),
  then one loop iteration of :data:`PLACE_OPS` ops over ``9 G + E`` elements per replica
  placed greedily (Libra's phase 2, every Lina replica): :func:`replica_placement`.
* Lina's path-table lookup: the previous layer's ``[T, k]`` expert ids copied to the host, a
  histogram, its product with the ``E x E`` table and a ranking (:data:`LOOKUP_OPS` ops over
  ``T k + E^2 + 2 E`` elements): :func:`path_lookup`.
* metadata: the load matrix back to the GPUs (one copy), after which the host launches the
  remote kernels: the GPU, drained by the synchronisation, waits one launch (one sync).
* EPLB's rebalancing (DeepSeek's ``rebalance_experts``, run once per rebalancing period, not
  per layer): a Python loop over every layer's items per packing with a Python ``min`` over
  the packs, and one loop iteration of a few torch ops per redundant expert, vectorised over
  layers: :func:`eplb_rebalance`.
* launches around every layer (SGLang's model runner, all systems): one torch op and one
  kernel launch per kernel of the layer (:func:`layer_launches`); the host runs ahead of the
  GPU stream, so they are exposed only where they exceed the layer.
"""

from __future__ import annotations

from dataclasses import dataclass

from libra_des.hardware.profiles.profile import HostOverheads

#: Torch calls of one greedy move, and of the moves' set-up (clone, row sum): counted on
#: ``calibrate.host.greedy_moves`` with a TorchFunctionMode (indexing and .item() included).
MOVE_OPS, MOVE_SETUP_OPS = 24, 2
#: Torch calls per replica placed, and of the placement's set-up (clone, sum, cast).
PLACE_OPS, PLACE_SETUP_OPS = 23, 3
#: Torch calls of Libra's vectorised phase 1 (where, topk, compare, scatter).
PHASE1_OPS = 4
#: Torch calls of Lina's lookup (flatten, bincount, cast, matmul, argsort and the compare).
LOOKUP_OPS = 6
#: Torch ops per redundant expert in DeepSeek's ``replicate_experts`` (a divide, a max, two
#: scatters into the physical map, a count increment: DeepSeek's eplb.py, read for facts).
EPLB_REPLICA_OPS = 5
#: Bytes per routing count and per top-k id sent to the host (int32).
ID_BYTES = 4

#: Defaults: ``libra-des calibrate --device cpu --quick`` (``calibrate.host``) on the
#: development host, 2026-12-07, one thread while other jobs shared its 2 cores (two runs:
#: loop iteration 39 / 44 ns, torch op 0.70 / 0.70 us, element 0.71 / 0.71 ns). Its stage
#: checks, model against wall clock: sharding 1.10 / 1.49 ms, replication 0.53 / 0.65 ms,
#: lookup 0.20 / 0.22 ms (64 moves; phase 1 of 4 per GPU, then 32 replicas; 32 Ki tokens;
#: G = 8, E = 128).
MEASURED_CPU = "AMD EPYC (lscpu model name), torch 2.13.0+cpu, CPython 3.11.7"
PYTHON_ITERATION_S = 4.1e-8
TORCH_OP_S = 7.0e-7
ELEMENT_OP_S = 7.1e-10
#: A small device-to-host copy with its completion wait: an assumption (10 us) until a GPU
#: run of ``libra-des calibrate --device cuda`` measures it; priced with the PCIe rate below.
COPY_S = 10e-6
#: Host-side cost of submitting one kernel: "about 4-6 us", measured by the pegainfer blog
#: ("From Launch Overhead to CUDA Graph", RTX 5070 Ti, CUDA 13; susun-blog.com/blog/
#: pegainfer-3-cuda-graph); we take the middle. After a synchronisation the GPU waits for it.
LAUNCH_S = 5e-6
#: Host link for routing and metadata: PCIe Gen5 x16 (about 64 GB/s per direction, the
#: datasheet figure for H100/H200 HGX boards) at an assumed 80% efficiency.
HOST_BW = 0.8 * 64e9


@dataclass(frozen=True)
class HostStage:
    """The calls one host stage makes (module doc); ``copy_bytes`` over the host link."""

    python_iterations: int = 0
    torch_ops: int = 0
    element_ops: int = 0
    copies: int = 0
    syncs: int = 0
    launches: int = 0
    copy_bytes: float = 0.0

    def compute(self) -> HostStage:
        """The stage's host compute alone (no copies, syncs or launches)."""
        return HostStage(self.python_iterations, self.torch_ops, self.element_ops)


@dataclass(frozen=True)
class HostPrices:
    """Seconds per call of each kind, and where each comes from (tier, source)."""

    python_iteration_s: float
    torch_op_s: float
    element_op_s: float
    copy_s: float
    launch_s: float
    sources: dict[str, tuple[str, str]]
    host_bw: float = HOST_BW

    @classmethod
    def of(cls, host: HostOverheads | None) -> HostPrices:
        """From a profile's ``host`` block (measured), else the defaults (module doc)."""
        here = ("measured", f"libra-des calibrate on {MEASURED_CPU} (sim/moe/host.py)")
        copy = ("assumption", "10 us per small copy with its wait (sim/moe/host.py)")
        launch = ("measured", "pegainfer blog, RTX 5070 Ti, 4-6 us per launch (sim/moe/host.py)")
        link = ("datasheet", "PCIe Gen5 x16, 64 GB/s per direction, at an assumed 80%")
        if host is None:
            return cls(PYTHON_ITERATION_S, TORCH_OP_S, ELEMENT_OP_S, COPY_S, LAUNCH_S, {
                "python_iteration_s": here, "torch_op_s": here, "element_op_s": here,
                "copy_s": copy, "launch_s": launch, "host_bw": link})
        mine = ("measured", f"profile host block: {host.cpu}")
        return cls(
            host.python_iteration_s.value, host.torch_op_s.value, host.element_op_s.value,
            host.copy_s.value if host.copy_s is not None else COPY_S,
            host.launch_s.value if host.launch_s is not None else LAUNCH_S,
            {"python_iteration_s": mine, "torch_op_s": mine, "element_op_s": mine,
             "copy_s": mine if host.copy_s is not None else copy,
             "launch_s": mine if host.launch_s is not None else launch, "host_bw": link})

    def compute_seconds(self, stage: HostStage) -> float:
        """The stage's host compute: loop iterations, torch ops and their elements."""
        return (stage.python_iterations * self.python_iteration_s
                + stage.torch_ops * self.torch_op_s + stage.element_ops * self.element_op_s)

    def seconds(self, stage: HostStage) -> float:
        """The whole stage: compute, copies (latency and bytes), synchronisations, launches."""
        return (self.compute_seconds(stage) + stage.copies * self.copy_s
                + stage.copy_bytes / self.host_bw + (stage.syncs + stage.launches) * self.launch_s)


def greedy_moves(gpus: int, experts: int, moves: int) -> HostStage:
    """Greedy token moves over ``[G, E]`` counts after they are copied to the host."""
    return HostStage(
        python_iterations=moves, torch_ops=MOVE_SETUP_OPS + MOVE_OPS * moves,
        element_ops=2 * gpus * experts + moves * (5 * gpus + experts),
        copies=1, copy_bytes=float(experts * ID_BYTES))


def replica_placement(gpus: int, experts: int, replicas: int, vectorised: int = 0) -> HostStage:
    """``vectorised`` replicas in one top-k step (0: no such step), then ``replicas`` placed
    one per loop iteration, over the predicted ``[G, E]`` counts."""
    phase1 = (PHASE1_OPS, 2 * gpus * experts + 2 * vectorised) if vectorised > 0 else (0, 0)
    return HostStage(
        python_iterations=replicas,
        torch_ops=PLACE_SETUP_OPS + phase1[0] + PLACE_OPS * replicas,
        element_ops=2 * gpus * experts + gpus + phase1[1] + replicas * (9 * gpus + experts),
        copies=1, copy_bytes=float(experts * ID_BYTES))


def path_lookup(tokens: int, experts: int, top_k: int) -> HostStage:
    """Lina's lookup of one layer's expert loads from the previous layer's expert ids."""
    return HostStage(torch_ops=LOOKUP_OPS, element_ops=tokens * top_k + experts**2 + 2 * experts,
                     copies=1, copy_bytes=float(tokens * top_k * ID_BYTES))


def metadata(nbytes: float) -> HostStage:
    """The load matrix back to a GPU; the host then launches the waiting kernels."""
    return HostStage(copies=1, syncs=1, copy_bytes=nbytes)


def eplb_rebalance(layers: int, experts: int, redundant: int, gpus: int) -> HostStage:
    """DeepSeek's rebalancing with one expert group on one node (Qwen3 has no groups): the
    group packing (one item per layer), ``redundant`` replica iterations over ``[L, E]``, then
    the ``E + R`` physical experts of every layer packed onto ``G`` GPUs, each item one loop
    iteration plus a Python ``min`` over the packs (``G`` more)."""
    physical = experts + redundant
    return HostStage(
        python_iterations=layers + redundant + layers * physical * (1 + gpus),
        torch_ops=EPLB_REPLICA_OPS * redundant,
        element_ops=redundant * 2 * layers * experts,
        copies=1, copy_bytes=float(layers * experts * ID_BYTES))


def layer_launches(kernels: int) -> HostStage:
    """The host's launches of one layer's ``kernels`` kernels (one torch op each)."""
    return HostStage(torch_ops=kernels, launches=kernels)


def measured_stages(gpus: int, experts: int, top_k: int, tokens: int, moves: int,
                    replicas: int, vectorised: int) -> dict[str, HostStage]:
    """The stages ``calibrate.host`` times, without their copies (a CPU has no device)."""
    return {
        "sharding_cpu": greedy_moves(gpus, experts, moves).compute(),
        "replication_cpu": replica_placement(gpus, experts, replicas, vectorised).compute(),
        "prediction_cpu": path_lookup(tokens, experts, top_k).compute(),
    }


#: The result's host stages, as ``layer_breakdown_s`` names them.
REPORTED = ("sharding_cpu", "metadata", "replication_cpu")


def host_report(prices: HostPrices, breakdown: dict[str, dict[str, float]], layer_s: float,
                kernels: int, cpu_predict: bool, eplb: HostStage | None) -> dict[str, object]:
    """The result's ``host_stages``: each host stage's seconds per layer (exposed + hidden,
    as simulated), whether any of it was exposed, the launches around a layer against the
    layer, EPLB's rebalancing (once per rebalancing period) and every price with its tier."""
    stages = REPORTED + (("prediction",) if cpu_predict else ())
    per_layer = {}
    for name in stages:
        part = breakdown.get(name, {"exposed": 0.0, "hidden": 0.0})
        seconds, exposed = float(part["exposed"] + part["hidden"]), float(part["exposed"])
        if seconds > 0:
            per_layer[name] = {"seconds": seconds, "exposed": exposed, "hidden": exposed == 0.0}
    launch = prices.seconds(layer_launches(kernels))
    out: dict[str, object] = {
        "per_layer_s": per_layer,
        # The host launches ahead of the stream: exposed only beyond the layer itself.
        "launches_per_layer": {"kernels": kernels, "seconds": launch,
                               "exposed": max(launch - float(layer_s), 0.0)},
        "prices": {name: {"value": getattr(prices, name), "tier": tier, "source": source}
                   for name, (tier, source) in prices.sources.items()},
    }
    if eplb is not None:
        out["eplb_rebalance_s"] = prices.seconds(eplb)
    return out
