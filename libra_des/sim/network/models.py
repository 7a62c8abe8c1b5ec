"""The network-model registry: what a scenario's ``fidelity`` names, looked up, never branched on.

A network model (:class:`~libra_des.sim.network.model.NetworkModel`) is one class; making a
scenario able to name it is one :class:`Fidelity` passed to :func:`register`: its name, how
to build it for a run (:data:`Builder`, from the run's :class:`NetworkSetup`), whether the
training simulator replays each op's exchange and hand-offs on it, and the factors by which
it stretches a run's wall time for the preflight estimate. The shipped models (:data:`SHIPPED`,
``fast`` and ``detailed``) are registered on the first look-up, then the entry points of the
group ``libra_des.network_models``; ``tests/toy_network.py`` is a complete third-party example.

Builders import their model when called, so looking a model up (the preflight does, for
every run) costs nothing: the flow model's max-min solver loads scipy.linalg, which fast
runs never use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from libra_des.registry import Registry, shipped_then_entry_points

if TYPE_CHECKING:
    import simpy

    from libra_des.hardware.costs import CostModel
    from libra_des.hardware.fabric.topology import Topology
    from libra_des.hardware.variance.model import VarianceModel
    from libra_des.sim.network.analytic import Port
    from libra_des.sim.network.model import NetworkModel

#: Entry-point group third-party network models register under.
GROUP = "libra_des.network_models"


@dataclass(frozen=True)
class NetworkSetup:
    """What a run offers a network model: its topology, cost model, link variance, and the
    simulator's per-GPU ports (MoE's processor-sharing links; None: the simulator has none)."""

    topology: Topology
    cost: CostModel
    variance: VarianceModel
    ports: Callable[[simpy.Environment], Sequence[Port]] | None = None


#: (the run's SimPy environment, its setup) -> the network model of the run.
Builder = Callable[["simpy.Environment", NetworkSetup], "NetworkModel"]


def unchanged(_size: int) -> float:
    """A model whose runs take about fast fidelity's time."""
    return 1.0


@dataclass(frozen=True)
class Fidelity:
    """One network model as ``fidelity`` names it.

    ``build``: the model for one run. ``replays_training``: the training simulator runs each
    op's attention exchange and stage hand-offs on it (``sim/training/detailed.py``); False:
    training folds the cost model's α-β times into op durations (no network object; the model
    then times MoE only). ``training_wall(gpus)`` and ``moe_wall(ep)``: wall time over fast
    fidelity's, for one training step of that many GPUs and one MoE layer of that EP group
    (the preflight's estimate for a model its data file, kinds/preflight.yaml, does not
    price: a model registered by others).
    """

    name: str
    build: Builder = field(compare=False)
    replays_training: bool = False
    #: What a reader of a result should know of this model's fidelity (the report's notice).
    note: str = ""
    training_wall: Callable[[int], float] = field(default=unchanged, compare=False)
    moe_wall: Callable[[int], float] = field(default=unchanged, compare=False)


def analytic(env: simpy.Environment, setup: NetworkSetup) -> NetworkModel:
    """α-β solo times, as jobs on the simulator's ports when it has them (``fast``)."""
    from libra_des.sim.network.analytic import AnalyticNetwork

    return AnalyticNetwork(env, setup.cost, None if setup.ports is None else setup.ports(env))


def flows(env: simpy.Environment, setup: NetworkSetup) -> NetworkModel:
    """Flows on the topology's routes, max-min fair, degraded links from the variance."""
    from libra_des.sim.network.flow.flow_model import Network

    cost = setup.cost
    return Network(env, flow_topology(setup.topology, cost), setup.variance,
                   p2p_rate=lambda k: intra_a2a_rate(cost, k),
                   fan_in_share=lambda n, gpn: a2a_fan_in(cost, n, gpn))


def a2a_fan_in(cost: CostModel, n: int, gpn: int) -> float:
    """The incast share the fast model gives an all-to-all of ``n`` ranks, ``gpn`` a node
    (none on a measured inter-node curve, without the NIC efficiency or with
    ``Mechanisms.fan_in`` off), so the flow model stretches its cross-node flows alike."""
    from libra_des.hardware.collectives.a2a_incast import applied_share

    curve, _ = cost.book.lookup("all_to_all", "direct", "inter", n, gpn)
    return applied_share(-(-n // gpn), curve.origin == "datasheet", cost.book.a2a_eta,
                         cost.a2a_on.fan_in)


def intra_a2a_rate(cost: CostModel, k: int) -> float:
    """A GPU's rate in an intra-node all-to-all of ``k`` ranks a node (B/s), as the fast
    model's ``local_a2a`` prices it (NCCL's p2p channels on a datasheet tier; a measured
    curve's own link rate), so both fidelities run intra-node messages at one rate."""
    gpn = cost.fabric.gpus_per_node
    k = max(1, min(k, gpn))
    _, tier = cost.book.lookup("all_to_all", "direct", "intra", k, gpn)
    return cost.p2p_intra_rate(k, tier)


def flow_topology(topology: Topology, cost: CostModel) -> Topology:
    """``topology`` as the flow model routes on it: point-to-point messages relayed through
    PXN proxies where the cost model's all-to-all has PXN in force (``a2a_on``), so both
    fidelities move the same messages over the same rails."""
    return topology.relaying(cost.pxn_in_force())


#: The shipped models, registered on the first look-up (``fast`` first: the default).
SHIPPED = (
    Fidelity("fast", analytic, note="alpha-beta costs, no flow-level contention (fidelity "
             "detailed replays the network)"),
    # The preflight prices both shipped models from its data file (kinds/preflight.yaml);
    # ``training_wall`` / ``moe_wall`` serve models registered by others.
    Fidelity("detailed", flows, replays_training=True),
)


#: The process's registry (a plug-in registry is the one piece of module state by design).
REGISTRY: Registry[Fidelity] = Registry(
    "network model", "fidelity", shipped_then_entry_points(lambda: SHIPPED, GROUP, Fidelity)
)
register = REGISTRY.register
names = REGISTRY.names
get = REGISTRY.get
