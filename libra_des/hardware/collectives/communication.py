"""Collective and point-to-point times on a fabric, from a profile's fitted curves.

Curve choice (measured values win over datasheet values). For a phase (op, algorithm, scope,
group size) the curve comes from, in order of *tier*:

0. a fit for exactly this op, algorithm, group and layout;
1. fits of this op and algorithm on other group sizes in the same scope (nearest in log group
   size; the total latency is interpolated in log group size between measured groups and
   scaled with the step count beyond them); across nodes also the machine's measured
   point-to-point curve (``send_recv`` between nodes), since every step of a ring, tree or
   direct exchange between nodes is a send/receive between two nodes;
2. fits of this algorithm for another op in the same scope (its per-step latency and curve);
3. fits of another algorithm in the same scope (never NVLS for non-NVLS and back);
4. the datasheet: the fabric's hop latency per step; NCCL's p2p NVLink rate inside a node,
   ``NIC_EFFICIENCY`` across nodes (all-to-all: its own share; its NICs' rate times the
   incast share, ``a2a_incast.py``), a cross-node send/recv pays ``NET_P2P_LATENCY``.

Without an explicit algorithm, the fastest candidate among those of the *lowest* available
tier is chosen, so a measured NCCL curve is never outbid by an idealised datasheet one.
Scopes: ``intra`` (the group inside one node) and ``inter`` (across nodes, NIC-bound). Tier
names reported to users (``cost --json``, ``result.json``): tiers 0-1 ``measured``, 2-3
``borrowed``, 4 ``datasheet``; a composed collective reports its worst phase.

Parallel paths across nodes: a measured inter-node curve shows what the measured machine
delivered with as many ranks per node as the measurement had (``inter_paths``: 1 for a
point-to-point test between two nodes). Priced from that curve, a node's ranks share
``min(ranks, NICs, inter_paths)`` NIC rates: parallelism across a node's NICs is credited only
as far as a measurement has shown it (the datasheet rail count otherwise; e.g. Vidur's A100
cluster's 7.8 GB/s between two one-GPU nodes prices a hierarchical all-reduce's inter phase).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from libra_des.errors import InputError
from libra_des.hardware.collectives import collective_ops
from libra_des.hardware.collectives.a2a_batch import checked, stack_seconds
from libra_des.hardware.collectives.a2a_incast import applied_share
from libra_des.hardware.collectives.alltoall import InterNodeA2A, Mechanisms, Protocol
from libra_des.hardware.collectives.curves import (
    A2A_NIC_EFFICIENCY,
    FLAT_ALGORITHMS,
    NET_P2P_LATENCY,
    NIC_EFFICIENCY,
    SHAPES,
    Curve,
    busbw_factor,
    check_op,
    flat_rate,
    node_nic_bw,
    phase_shape,
)
from libra_des.hardware.collectives.ecmp import spine_view
from libra_des.hardware.collectives.hierarchy import Step, decompose, level_ranks
from libra_des.hardware.collectives.nccl_tuner import (
    NO_OVERRIDES,
    NcclTuner,
    Overrides,
    check_override,
)
from libra_des.hardware.collectives.tiers import DATASHEET_TIER, TIER_NAMES, tier_name
from libra_des.hardware.fabric.rates import Fabric
from libra_des.hardware.profiles.profile import Fit, Piece, Profile

MEMO_LIMIT = 1 << 16


@dataclass(frozen=True)
class CollectiveCost:
    """One collective's time, the algorithm chosen, and nccl-tests' bus bandwidth (GB/s);
    ``protocol`` and ``channels``: NCCL's choice for that algorithm at this size (empty / 0
    where NCCL's tuner does not price the algorithm: direct exchanges, composed ones)."""

    seconds: float
    algorithm: str
    busbw_gbs: float
    tier: str = "measured"
    protocol: str = ""
    channels: int = 0


@dataclass(frozen=True)
class Phase:
    seconds: np.ndarray
    tier: int


class CurveBook:
    """Finds the curve for a phase in a profile's fits (module docstring)."""

    def __init__(self, profile: Profile, fabric: Fabric, efficiency: bool = True) -> None:
        self.fabric = fabric
        # Datasheet inter-node curves run at NCCL's usual share of the NIC (collectives.py).
        self.nic_eta = NIC_EFFICIENCY if efficiency else 1.0
        self.a2a_eta = A2A_NIC_EFFICIENCY if efficiency else 1.0  # all-to-all's own figure
        self.net_p2p = NET_P2P_LATENCY if efficiency else 0.0
        # Intra-node fits describe the profile's own node fabric (NVSwitch or PCIe); on a
        # different kind of node they do not apply and the datasheet takes over.
        same_node = fabric.intra_kind == profile.interconnect.intra_kind
        self.fits = [
            f
            for f in profile.fits
            if efficiency and f.model == "alpha_beta" and (same_node or f.scope == "inter")
        ]
        self.memo: dict[tuple[str, str, str, int, int], tuple[Curve, int]] = {}
        # Concurrent inter-node paths per node a measurement has shown (module docstring).
        inter = [f.gpus_per_node or 1 for f in self.fits if f.scope == "inter"]
        self.inter_paths: int | None = max(inter) if inter else None

    def latency(self, scope: str) -> float:
        return self.fabric.intra_latency if scope == "intra" else self.fabric.inter_latency

    def lookup(
        self, op: str, algorithm: str, scope: str, group: int, gpn: int
    ) -> tuple[Curve, int]:
        """(curve, tier) of a phase; memoised per instance (profile and fabric are frozen)."""
        key = (op, algorithm, scope, group, min(gpn, group))
        if key not in self.memo:
            self.memo[key] = self.find(*key)
        return self.memo[key]

    def find(self, op: str, algorithm: str, scope: str, group: int, gpn: int) -> tuple[Curve, int]:
        pool = [f for f in self.fits if f.scope == scope]
        exact = [
            f
            for f in pool
            if (f.op, f.algorithm, f.group, min(f.gpus_per_node or f.group, f.group))
            == (op, algorithm, group, gpn)
        ]
        if exact:
            return Curve(exact[0].pieces, "measured"), 0
        same = [f for f in pool if f.op == op and f.algorithm == algorithm]
        if same:
            return Curve(regroup(same, op, algorithm, group), "borrowed"), 1
        nvls = algorithm == "nvls"
        p2p = [f for f in pool if f.op == "send_recv"]
        if scope == "inter" and p2p and not nvls:
            # Every step of an exchange between nodes is a send/receive between two nodes.
            return Curve(nearest(p2p, 2).pieces, "measured"), 1
        for tier, fits in (
            (2, [f for f in pool if f.algorithm == algorithm]),
            (3, [f for f in pool if (f.algorithm == "nvls") == nvls]),
        ):
            for other in collective_ops.get(op).borrow:
                cand = [f for f in fits if f.op == other]
                if cand:
                    return Curve(nearest(cand, group).pieces, "borrowed"), tier
        eta = self.a2a_eta if op == "all_to_all" else self.nic_eta
        eta, latency = (eta, self.net_p2p) if scope == "inter" else (1.0, 0.0)
        if op != "send_recv":
            # Collectives' steps and an all-to-all's back-to-back messages are pipelined: each
            # pays the hop latency; an all-to-all pays the message latency once (alltoall.py).
            latency = 0.0
        return Curve.datasheet(max(self.latency(scope), latency), eta), DATASHEET_TIER


def nearest(fits: list[Fit], group: int) -> Fit:
    return min(fits, key=lambda f: (abs(math.log(f.group) - math.log(group)), -f.group))


def total_alpha(fit: Fit) -> float:
    _, steps = phase_shape(fit.op, fit.algorithm or "ring", fit.group, np.ones(1))
    return fit.pieces[0].alpha_step * max(steps, 1)


def regroup(fits: list[Fit], op: str, algorithm: str, group: int) -> tuple[Piece, ...]:
    """The nearest group's curve with its latency moved to ``group`` (tier 1)."""
    base = nearest(fits, group)
    ordered = sorted(fits, key=lambda f: f.group)
    logs = [math.log(f.group) for f in ordered]
    alphas = [total_alpha(f) for f in ordered]
    _, steps = phase_shape(op, algorithm, group, np.ones(1))
    if group > ordered[-1].group:
        _, last_steps = phase_shape(op, algorithm, ordered[-1].group, np.ones(1))
        target = alphas[-1] * steps / max(last_steps, 1)
    else:
        target = float(np.interp(math.log(group), logs, alphas))
    scale = target / total_alpha(base) if total_alpha(base) > 0 else 1.0
    return tuple(p.model_copy(update={"alpha_step": p.alpha_step * scale}) for p in base.pieces)


class Communication:
    """Times collectives, all-to-all(v) and point-to-point transfers on ``fabric``."""

    def __init__(self, profile: Profile, fabric: Fabric, efficiency: bool = True,
                 comm: Overrides = NO_OVERRIDES) -> None:
        algorithm, protocol = comm
        self.profile = profile
        self.fabric = fabric
        self.book = CurveBook(profile, fabric, efficiency)
        # Scenario-wide overrides (NCCL_ALGO / NCCL_PROTO analogues), checked before any work.
        check_override(fabric, algorithm, protocol)
        self.forced_algorithm, self.forced_protocol = algorithm, protocol
        # Datasheet-tier collectives are priced by NCCL's own tuning model (nccl_tuner.py);
        # without efficiencies the pure alpha-beta closed forms stay.
        self.tuner = (
            NcclTuner(fabric, profile.device, self.book.nic_eta, profile.interconnect.nvls_ops)
            if efficiency else None
        )
        # Answers depend only on the frozen profile and fabric: remembered per instance.
        self.answers: dict[tuple[str, float, int, int, str | None], CollectiveCost] = {}
        # Worst curve tier each op has been priced with (result.json's ``comm_tiers``).
        self.ledger: dict[str, int] = {}
        # The all-to-all's mechanisms (alltoall.py), all on; the routing model sets ``ecmp``.
        self.a2a_on = Mechanisms()
        # Channels (SMs) a point-to-point kernel runs on (None: NCCL's p2p channels).
        self.p2p_channels: int | None = None

    def pxn_in_force(self) -> bool:
        """Whether NCCL's PXN relays cross-rail messages (alltoall.py): on in ``a2a_on``, on
        a rail-optimised fabric with NVLink in the node (the flow model asks the same)."""
        f = self.fabric
        return self.a2a_on.pxn and f.rail_optimized and f.intra_kind == "nvswitch"

    def note(self, op: str, tier: int) -> None:
        self.ledger[op] = max(self.ledger.get(op, 0), tier)

    def tiers(self) -> dict[str, str]:
        """Per op priced so far, the tier of its worst-sourced phase (module docstring)."""
        return {op: tier_name(t) for op, t in sorted(self.ledger.items())}

    def node_bw(self, ranks_per_node: int, tier: int, nodes: int | None = None) -> float:
        """A node's usable inter-node rate for a phase priced from a curve of ``tier``
        (rail-aligned among ``nodes`` nodes when given; see :meth:`Fabric.rail_bw`)."""
        paths = self.book.inter_paths if tier < DATASHEET_TIER else None
        return node_nic_bw(self.fabric, ranks_per_node, paths, nodes)

    # ------------------------------------------------------------------ layout
    def layout(self, group: int, gpus_per_node: int | None) -> int:
        f = self.fabric
        if not isinstance(group, int | np.integer) or group < 1:
            raise InputError("group", group, "a positive number of GPUs")
        gpn = min(group, f.gpus_per_node) if gpus_per_node is None else gpus_per_node
        if not 1 <= gpn <= f.gpus_per_node:
            raise InputError("gpus_per_node", gpn, f"1..{f.gpus_per_node} (the topology's)")
        if math.ceil(group / gpn) > f.nodes:
            raise InputError("group", group, f"<= {gpn * f.nodes} GPUs at {gpn} per node")
        return int(min(gpn, group))

    def algorithms(self, op: str, group: int, gpn: int) -> list[str]:
        """Algorithms available for ``op`` on this layout."""
        algs = [a for a in FLAT_ALGORITHMS[op] if a != "nvls" or self.nvls(op, group, gpn)]
        if group > gpn and collective_ops.get(op).composes:
            # Direct exchanges assume a non-blocking switch: only inside a node.
            algs = [a for a in algs if a != "direct"] + ["hierarchical"]
        return algs

    def nccl_algorithms(self, op: str, group: int, gpn: int) -> list[str]:
        """NCCL's algorithms the tuner allows for ``op`` here (none for direct exchanges)."""
        if self.tuner is None or collective_ops.get(op).pairwise:
            return []
        return self.tuner.algorithms(op, group, gpn)

    def nvls(self, op: str, group: int, gpn: int) -> bool:
        return group <= gpn and self.fabric.nvls and op in self.profile.interconnect.nvls_ops

    # ------------------------------------------------------------------ public
    def collective(
        self,
        op: str,
        nbytes: float,
        group: int,
        gpus_per_node: int | None = None,
        algorithm: str | None = None,
    ) -> CollectiveCost:
        check_op(op)
        size = float(nbytes)
        if not math.isfinite(size) or size < 0:
            raise InputError("nbytes", nbytes, "a finite number of bytes >= 0")
        gpn = self.layout(group, gpus_per_node)
        if group == 1 or size == 0:
            return CollectiveCost(0.0, algorithm or "none", 0.0)
        key = (op, size, int(group), gpn, algorithm)
        if key not in self.answers:
            if len(self.answers) >= MEMO_LIMIT:
                self.answers.clear()
            self.answers[key] = self.choose(op, size, int(group), gpn, algorithm)
        return self.answers[key]

    def candidates(self, op: str, group: int, gpn: int) -> tuple[list[str], list[str]]:
        """(automatic candidates, every algorithm that may be asked for) on this layout."""
        avail = self.algorithms(op, group, gpn)
        auto = list(dict.fromkeys([*avail, *self.nccl_algorithms(op, group, gpn)]))
        # ``multilevel`` (every switch level, hierarchy.py) only when asked for: NCCL's own
        # hierarchy is node / network, so the automatic choice never takes it.
        asked = [*auto, "multilevel"] if "hierarchical" in avail else auto
        return auto, asked

    def choose(
        self, op: str, size: float, group: int, gpn: int, algorithm: str | None
    ) -> CollectiveCost:
        """Time every candidate algorithm; keep the fastest of the lowest curve tier. Where
        that tier is the datasheet, only NCCL's own algorithms compete (as NCCL's tuner)."""
        auto, asked = self.candidates(op, group, gpn)
        if algorithm is not None and algorithm not in asked:
            allowed = " | ".join(asked)
            raise InputError("algorithm", algorithm, f"{allowed} (for {op} on this layout)")
        forced = self.forced_algorithm if self.forced_algorithm in asked else None
        pinned = algorithm or forced
        chosen: list[str] = [pinned] if pinned else auto
        phases = {a: self.phase(op, a, group, gpn, np.array([size])) for a in chosen}
        best_tier = min(p.tier for p in phases.values())
        names = [a for a, p in phases.items() if p.tier == best_tier]
        nccl = self.nccl_algorithms(op, group, gpn)
        if best_tier == DATASHEET_TIER and len(names) > 1 and any(a in nccl for a in names):
            names = [a for a in names if a in nccl]
        name = min(names, key=lambda a: float(phases[a].seconds[0]))
        seconds, tier = float(phases[name].seconds[0]), phases[name].tier
        if group > gpn and collective_ops.get(op).node_floor:
            # Spanning nodes never removes the work inside one node: every rank still moves
            # at least the single-node collective's bytes over NVLink (or PCIe), whichever
            # algorithm crosses the nodes; priced by the same intra-node curves.
            floor = self.collective(op, size, gpn, gpn)
            if floor.seconds > seconds:
                seconds, tier = floor.seconds, max(tier, TIER_NAMES.index(floor.tier))
        busbw = size / seconds * busbw_factor(op, group) / 1e9 if seconds > 0 else 0.0
        self.note(op, tier)
        protocol, channels = self.nccl_choice(op, size, group, gpn, name)
        return CollectiveCost(seconds, name, busbw, tier_name(tier), protocol, channels)

    def nccl_choice(self, op: str, size: float, n: int, gpn: int, alg: str) -> tuple[str, int]:
        """NCCL's protocol and launched channels for ``alg`` at ``size`` ('' and 0: none)."""
        if self.tuner is None:
            return "", 0
        if collective_ops.get(op).pairwise:
            return self.tuner.p2p_protocol(size / n if op == "all_to_all" else size), 0
        pick = self.tuner.choose(op, size, n, gpn, alg, self.forced_protocol)
        return (pick.protocol, pick.channels) if pick else ("", 0)

    def choices(self) -> dict[str, dict[str, object]]:
        """Per op, NCCL's (algorithm, protocol, channels) for its largest call so far."""
        out: dict[str, tuple[float, dict[str, object]]] = {}
        for (op, size, _n, _g, _a), res in self.answers.items():
            if res.seconds > 0 and (op not in out or size > out[op][0]):
                row = {"algorithm": res.algorithm, "protocol": res.protocol,
                       "channels": res.channels, "bytes": size}
                out[op] = (size, row)
        return {op: row for op, (_, row) in sorted(out.items())}

    def p2p(self, nbytes: float, same_node: bool, pair: tuple[int, int] | None = None) -> float:
        """One message between two GPUs ``pair`` (send_recv curve, one hop; Fabric.pair_bw)."""
        size = float(nbytes)
        if not math.isfinite(size) or size < 0:
            raise InputError("nbytes", nbytes, "a finite number of bytes >= 0")
        if size == 0:
            return 0.0
        scope = "intra" if same_node else "inter"
        curve, tier = self.book.lookup("send_recv", "direct", scope, 2, 2 if same_node else 1)
        rate = self.p2p_intra_rate(2, tier) if same_node else (
            self.fabric.pair_bw(*pair) if pair else self.fabric.inter_bw)
        self.note("send_recv", tier)
        return float(curve.seconds(np.array([size]), rate, 1)[0])

    def all_to_allv(self, send_bytes: np.ndarray, gpus_per_node: int | None = None) -> float:
        """Uneven all-to-all: bound by the busiest sender/receiver and the bottleneck link
        (priced as a stack of one matrix, :mod:`libra_des.hardware.collectives.a2a_batch`)."""
        send = np.asarray(send_bytes, dtype=np.float64)
        if send.ndim != 2:
            raise InputError("send_bytes", send.shape, "a square [n, n] matrix")
        secs, tier = stack_seconds(self, checked(send), gpus_per_node)
        if tier >= 0:
            self.note("all_to_allv", tier)
        return float(secs[0])

    # ------------------------------------------------------------------ internals
    def local_a2a(
        self, n: int, gpn: int, v_intra: np.ndarray, v_bridge: np.ndarray
    ) -> tuple[np.ndarray, int]:
        """Intra-node part of an all-to-all: the busiest rank's NVLink (or PCIe) volume and
        the busiest PCIe switch uplink."""
        f = self.fabric
        curve, tier = self.book.lookup("all_to_all", "direct", "intra", min(n, gpn), gpn)
        rate = self.p2p_intra_rate(min(n, gpn), tier)
        out = np.where(v_intra > 0, curve.seconds(v_intra, rate, 1), 0.0)
        if f.pcie_bridge_bw > 0 and np.any(v_bridge > 0):
            bridge = curve.seconds(v_bridge, f.pcie_bridge_bw, 1)
            out = np.maximum(out, np.where(v_bridge > 0, bridge, 0.0))
        return out, tier

    def p2p_intra_rate(self, gpn: int, tier: int) -> float:
        """A GPU's p2p rate in its node (B/s): NCCL's p2p channels (``p2p_nvlink_gbs``)."""
        f = self.fabric
        if tier < DATASHEET_TIER or self.tuner is None or f.intra_kind != "nvswitch":
            return f.intra_bw  # a measured curve's own link rate, or no NVSwitch
        return self.tuner.p2p_nvlink_gbs(gpn, self.p2p_channels) * 1e9

    def inter_a2a(self, n: int, gpn: int) -> tuple[InterNodeA2A, int]:
        """The cross-node message model (:mod:`libra_des.hardware.collectives.alltoall`) for a
        layout."""
        curve, tier = self.book.lookup("all_to_all", "direct", "inter", n, gpn)
        hop = self.fabric.intra_bw if self.fabric.intra_kind == "nvswitch" else 0.0
        pxn = self.pxn_in_force() and hop > 0
        # Busy ports and the expected ECMP collision factor of this layout (ecmp.py); a
        # factor set in ``a2a_on`` (tests, studies) replaces the fast routing model's.
        leaves, factor, scale = spine_view(self.fabric, n, gpn, pxn)
        on = self.a2a_on if self.a2a_on.ecmp is not None else replace(self.a2a_on, ecmp=factor)
        # Datasheet curves: the first message's software latency once on top of the per-message
        # gap (hop latency), and NCCL's P2P protocol by message size (alltoall.py).
        sheet = curve.origin == "datasheet"
        once = max(self.book.net_p2p - curve.pieces[0].alpha_step, 0.0) if sheet else 0.0
        t = self.tuner.t if sheet and self.tuner is not None else None
        protocol = Protocol(t["p2p_ll_threshold"], t["factors"]["ring_ll"]) if t else None
        # Incast at the receiving NICs (a2a_incast.py); a measured curve carries its own.
        fan = applied_share(-(-n // gpn), sheet, self.book.a2a_eta, on.fan_in)
        rates = (self.fabric.inter_bw * scale * fan, self.node_bw(gpn, tier) * scale * fan)
        model = InterNodeA2A(curve, *rates, leaves, once, protocol, hop, on, fan)
        return model, tier

    def phase(self, op: str, alg: str, n: int, gpn: int, size: np.ndarray) -> Phase:
        """Seconds (and curve tier) of one algorithm for group ``n`` at ``gpn`` per node."""
        if alg in ("hierarchical", "multilevel"):
            return self.hierarchical(op, n, gpn, size, alg == "multilevel")
        if op == "all_to_all":
            return self.uniform_a2a(n, gpn, size)
        nccl_only = (op, alg) not in SHAPES
        if not nccl_only:
            scope = "intra" if n <= gpn else "inter"
            curve, tier = self.book.lookup(op, alg, scope, n, gpn)
            if tier < DATASHEET_TIER or self.tuner is None:
                volume, steps = phase_shape(op, alg, n, size)
                return Phase(curve.seconds(volume, self.rate(alg, n, gpn, tier), steps), tier)
        # No measurement: NCCL's tuning model prices the algorithm (nccl_tuner.py), or the
        # datasheet alpha-beta curve where NCCL does not run it (e.g. a direct all-gather).
        timed = self.tuner.times(op, size, n, gpn, alg, self.forced_protocol) if self.tuner \
            else None
        if timed is None:
            if nccl_only:
                raise InputError("algorithm", alg, f"an algorithm NCCL runs for {op} here")
            volume, steps = phase_shape(op, alg, n, size)
            return Phase(curve.seconds(volume, self.rate(alg, n, gpn, tier), steps), tier)
        return Phase(timed, DATASHEET_TIER)

    def rate(self, alg: str, n: int, gpn: int, tier: int = DATASHEET_TIER) -> float:
        f = self.fabric
        rate = flat_rate(f, n, gpn, self.book.inter_paths if tier < DATASHEET_TIER else None)
        if f.intra_kind == "pcie" and f.pcie_switches > 1 and f.pcie_bridge_bw > 0:
            # A ring or tree crosses each switch uplink once per direction; direct traffic
            # from every rank of a switch shares it.
            share = 1 if alg != "direct" else math.ceil(min(n, gpn) / f.pcie_switches)
            rate = min(rate, f.pcie_bridge_bw / share)
        return rate

    def uniform_a2a(self, n: int, gpn: int, size: np.ndarray) -> Phase:
        per_peer = np.asarray(size, dtype=np.float64) / n
        g = min(n, gpn)
        secs, tier = self.local_a2a(n, gpn, (g - 1) * per_peer, self.uniform_bridge(g) * per_peer)
        if n > gpn:
            model, inter_tier = self.inter_a2a(n, gpn)
            secs = np.maximum(secs, model.uniform(n, gpn, per_peer))
            tier = max(tier, inter_tier)
        return Phase(secs, tier)

    def uniform_bridge(self, g: int) -> float:
        """Cross-switch bytes (in units of one peer share) on the busiest uplink."""
        f = self.fabric
        if f.intra_kind != "pcie" or f.pcie_switches <= 1 or f.pcie_bridge_bw <= 0:
            return 0.0
        per_switch = min(g, math.ceil(f.gpus_per_node / f.pcie_switches))
        return float(per_switch * (g - per_switch))

    def best(self, op: str, n: int, gpn: int, size: np.ndarray) -> Phase:
        """The fastest flat algorithm of the lowest tier (used for hierarchical phases)."""
        if n <= 1:
            return Phase(np.zeros_like(size, dtype=np.float64), 0)
        phases = [
            self.phase(op, a, n, gpn, size)
            for a in self.algorithms(op, n, gpn)
            if a != "hierarchical"
        ]
        tier = min(p.tier for p in phases)
        secs = np.min([p.seconds for p in phases if p.tier == tier], axis=0)
        return Phase(secs, tier)

    def hierarchical(
        self, op: str, n: int, gpn: int, size: np.ndarray, every_level: bool = False
    ) -> Phase:
        """Intra-node phase, inter-node phase over the rails, intra-node phase (as NCCL);
        with ``every_level`` one phase per switch level
        (:mod:`~libra_des.hardware.collectives.hierarchy`)."""
        parts = [p for _, p in self.hierarchical_parts(op, n, gpn, size, every_level)]
        return Phase(np.sum([p.seconds for p in parts], axis=0), max(p.tier for p in parts))

    def hierarchical_parts(
        self, op: str, n: int, gpn: int, size: np.ndarray, every_level: bool = False
    ) -> list[tuple[str, Phase]]:
        """Named phases of a hierarchical collective
        (:func:`~libra_des.hardware.collectives.hierarchy.
        decompose`): at two levels, all_reduce is reduce_scatter in the node, all_reduce of
        S/g across nodes on each rail, all_gather in the node; all_gather / reduce_scatter the
        two halves of that; broadcast across nodes first, then inside each node."""
        s = np.asarray(size, dtype=np.float64)
        steps = decompose(op, level_ranks(self.fabric, n, gpn, every_level))
        return [(self.step_name(st, every_level), self.step_phase(st, gpn, s)) for st in steps]

    @staticmethod
    def step_name(step: Step, every_level: bool) -> str:
        if step.level == 0:
            halves = step.op == "all_reduce"
            return "intra reduce_scatter + all_gather" if halves else f"intra {step.op}"
        return f"inter level {step.level} {step.op}" if every_level else f"inter {step.op}"

    def step_phase(self, step: Step, gpn: int, s: np.ndarray) -> Phase:
        """A step's seconds: inside the node by the intra-node curves, across nodes on each
        rail at the rate of the lowest level whose unit holds ``step.span`` nodes."""
        share = s / step.divisor
        if step.level == 0:
            if step.op == "all_reduce":
                return self.intra_all_reduce(gpn, share)
            return self.best(step.op, gpn, gpn, share)
        return InterView(self, gpn, step.span).best(step.op, step.ranks, share)

    def explain(
        self,
        op: str,
        nbytes: float,
        group: int,
        gpus_per_node: int | None,
        algorithm: str | None = None,
    ) -> dict[str, object]:
        """``cost --json`` detail: the tier of every phase and the inter-node rate achieved
        (bytes one node sends across its boundary / phase seconds, GB/s)."""
        res = self.collective(op, nbytes, group, gpus_per_node, algorithm)
        gpn = self.layout(group, gpus_per_node)
        out: dict[str, object] = {"tier": res.tier, "inter_paths": self.book.inter_paths}
        if op == "all_to_all" and group > gpn and nbytes > 0:  # the mechanisms, named
            out["breakdown"] = self.inter_a2a(group, gpn)[0].breakdown(group, gpn, nbytes / group)
        if res.algorithm not in ("hierarchical", "multilevel") or nbytes <= 0:
            return out
        nodes = math.ceil(group / gpn)
        phases = []
        every = res.algorithm == "multilevel"
        sizes = np.array([float(nbytes)])
        for name, ph in self.hierarchical_parts(op, group, gpn, sizes, every):
            row: dict[str, object] = {
                "phase": name,
                "seconds": float(ph.seconds[0]),
                "tier": tier_name(ph.tier),
            }
            if name.startswith("inter ") and not every and ph.seconds[0] > 0:
                per_rail = nbytes / gpn if op != "broadcast" else nbytes
                vol = float(phase_shape(op, "ring", nodes, np.array([per_rail]))[0][0])
                row["node_gbs"] = vol * gpn / float(ph.seconds[0]) / 1e9
            phases.append(row)
        out["phases"] = phases
        return out

    def intra_all_reduce(self, gpn: int, s: np.ndarray) -> Phase:
        """The two intra-node halves (reduce-scatter then all-gather) of a hierarchical
        all-reduce; a measured intra-node all-reduce is exactly those two halves, so it prices
        them when their own curves are of a worse tier."""
        halves = [self.best("reduce_scatter", gpn, gpn, s), self.best("all_gather", gpn, gpn, s)]
        split = Phase(halves[0].seconds + halves[1].seconds, max(p.tier for p in halves))
        whole = self.best("all_reduce", gpn, gpn, s)
        return whole if whole.tier < split.tier else split


@dataclass(frozen=True)
class InterView:
    """The inter-node phase of a hierarchical collective: one rank per node on each rail,
    ``g`` rails in parallel sharing the node's NICs; ``span``: the nodes whose unit's links
    carry it (default: the phase's own nodes)."""

    comm: Communication
    gpn: int
    span: int | None = None

    def best(self, op: str, nodes: int, size: np.ndarray) -> Phase:
        if nodes <= 1:
            return Phase(np.zeros_like(size), 0)
        phases = []
        for alg in FLAT_ALGORITHMS[op]:
            if alg == "nvls":
                continue
            volume, steps = phase_shape(op, alg, nodes, size)
            curve, tier = self.comm.book.lookup(op, alg, "inter", nodes, 1)
            rate = self.comm.node_bw(self.gpn, tier, self.span or nodes) / self.gpn
            phases.append(Phase(curve.seconds(volume, rate, steps), tier))
        tier = min(p.tier for p in phases)
        return Phase(np.min([p.seconds for p in phases if p.tier == tier], axis=0), tier)
