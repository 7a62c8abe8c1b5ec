"""NCCL's tuning model: every (algorithm, protocol) pair's predicted time, and NCCL's choice.

Where a profile holds no measurement for a collective (the datasheet tier of
:mod:`libra_des.hardware.collectives.communication`), a call is priced the way NCCL's own tuner
predicts
it and the pair with the lowest predicted time among those the topology allows is chosen, as
NCCL does per call. The constants are NCCL's, copied as facts with their source into
``calibration/public/nccl_tuning.yaml``; this module only restates the model's structure:

- **time** ``= latency + size / bandwidth`` (``size``: nccl-tests' size; bandwidth: the
  algorithm bandwidth, bytes of ``size`` per second);
- **latency**: a base latency per (algorithm, protocol) plus per-hop latencies of the link kind
  (NVLink, PCIe, network) times the algorithm's hop count (ring: its ``nsteps`` steps, of which
  the node-crossing ones pay the network's; tree: twice the chain inside a node plus
  ``log2(nodes)`` network hops; NVLS: one NVLink SHARP hop, plus a network one across nodes;
  PAT: ``log2(nodes)`` network hops over 3.5 plus 2.8 us per rank);
- **bandwidth**: ``channels x per-channel bandwidth`` (the bus bandwidth), scaled by the
  protocol's efficiency (LL moves half a line's payload and is capped per GPU generation,
  LL128 120/128, Simple all of it), capped per channel where NCCL caps it, and converted to an
  algorithm bandwidth (ring: ``ranks / nsteps``; tree and CollNet all_reduce: 0.5; NVLS
  all_reduce pipelines its two halves).

Channels and per-channel bandwidth follow NCCL's topology search in outline: the GPU's NVLink
rate as NCCL credits it (datasheet rate x NCCL's per-link credit over the datasheet per-link
rate), split into the fewest channels of the fastest search speed that uses it best, then
doubled at half speed (not below 25 GB/s, nor on Hopper below 50 GB/s with more than 4);
across nodes the network speeds are tried and each NIC (line rate x the measured
``NIC_EFFICIENCY``) carries as many channels as its rate holds; a tree has the ring's
channels and on two nodes raises its intra-node speed step by step while it is below twice
the network's (:meth:`NcclTuner.tree_graph`); with one GPU a node NCCL builds the simpler
``PATTERN_TREE``, whose bus bandwidth the tuner takes 15% off. NVLS follows NCCL's
NVLS graph: one channel per GPU of the node at the search speed its NVLink carries
``GPUs + 1`` times (:meth:`nvls_graph`; NCCL's 16 NVLS CTAs are the SMs a call takes, not
its bandwidth). A call launches fewer channels when it is small (``nBytes < channels x
threads x threshold``); that
count is reported, while the predicted time uses the tuner's full-channel bandwidth, as NCCL's
own model does.

Availability (as ``tuning.cc``): NVLS only on NVSwitch nodes with NVLink SHARP and only with
Simple, all_reduce also across nodes as NVLS-tree; all_gather / reduce_scatter NVLS only inside
one node; CollNet only where a network level declares in-network reduction (SHARP), Direct only
on NVSwitch nodes, and its all_gather / reduce_scatter only with one GPU per NIC; PAT only for
all_gather / reduce_scatter with one GPU per node; broadcast and reduce only ring; LL128 not
over PCIe inside a node. Deviations (our assumptions): NVLS-tree's network rate is not
doubled on two nodes (that would let a node's NICs beat their line rate), the CPU is taken
as x86 Intel (network overhead 1 us, LL caps of that row), ring broadcast/reduce channels as
the same channels both ways, graph network latency 0 (NCCL's default), a node of several
GPUs always finding NCCL's balanced tree (Hopper's fallback to ``PATTERN_TREE`` depends on
PCIe placement we do not model). Up to two nodes the tuner reads a graph's intra-node speed,
as NCCL does (a two-node tree's raised ``bwIntra``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from libra_des.config.yaml_text import package_yaml
from libra_des.errors import InputError
from libra_des.hardware.collectives import collective_ops
from libra_des.hardware.fabric.rates import Fabric
from libra_des.hardware.gpu_records import device_record

#: ``comm.algorithm`` and ``comm.protocol`` of a scenario (None: NCCL's own choice).
Overrides = tuple[str | None, str | None]
NO_OVERRIDES: Overrides = (None, None)
ALGORITHMS = ("ring", "tree", "nvls", "nvls_tree", "collnet_direct", "collnet_chain", "pat")
PROTOCOLS = ("LL", "LL128", "Simple")
LL, LL128, SIMPLE = range(3)
TUNING_FILE = Path(__file__).resolve().parents[3] / "calibration" / "public" / "nccl_tuning.yaml"


@lru_cache(maxsize=4)
def load_tuning(path: str = str(TUNING_FILE)) -> dict[str, Any]:
    """NCCL's tuning constants (the file's sources name each block)."""
    data: dict[str, Any] = package_yaml(Path(path))
    return data


def generation(device: str) -> str:
    """NCCL's GPU generation index for a device, from its GPU record (the assumed device's,
    Hopper, when none names it)."""
    return device_record(device).nccl_generation.value


@dataclass(frozen=True)
class Graph:
    """A searched channel set: ``channels`` channels of ``bw`` GB/s each (bus bandwidth);
    ``bw_inter``: a channel's network rate where it differs (NCCL's ``bwInter``)."""

    channels: int
    bw: float
    bw_inter: float | None = None


@dataclass(frozen=True)
class Entry:
    """One cell of the tuner's table: latency (us), algorithm bandwidth (GB/s), channels."""

    algorithm: str
    protocol: str
    latency_us: float
    bandwidth_gbs: float
    channels: int


@dataclass(frozen=True)
class Choice:
    """The pair chosen for one call, the channels it launches and its predicted seconds."""

    algorithm: str
    protocol: str
    channels: int
    seconds: float


def pow2_up(n: int) -> int:
    """The smallest power of two >= ``n`` (1 for n <= 1)."""
    return 1 << max(int(n) - 1, 0).bit_length()


def log2i(n: int) -> int:
    return max(math.floor(math.log2(n)), 0) if n >= 1 else 0


class NcclTuner:
    """NCCL's tuner on one fabric (module docstring); tables memoised per layout."""

    def __init__(self, fabric: Fabric, device: str, nic_efficiency: float,
                 nvls_ops: tuple[str, ...] = ("all_reduce",),
                 tuning: dict[str, Any] | None = None) -> None:
        self.fabric = fabric
        self.nvls_ops = nvls_ops
        self.gen = generation(device)
        self.nic_eff = nic_efficiency
        self.t = tuning or load_tuning()
        self.memo: dict[tuple[str, int, int], tuple[Entry, ...]] = {}

    # ------------------------------------------------------------------ graphs
    def intra_gbs(self) -> float:
        """A GPU's intra-node rate as NCCL's topology credits it (GB/s)."""
        f, t = self.fabric, self.t
        if f.intra_kind != "nvswitch":
            return f.intra_bw / 1e9
        gen = self.gen
        credit = float(t["nvlink_credit_gbs"][gen]) / float(t["nvlink_datasheet_gbs"][gen])
        return f.intra_bw / 1e9 * credit

    def nic_gbs(self, nodes: int, gpn: int) -> float:
        """The node's NIC rate a group's ranks there can use together (GB/s)."""
        f = self.fabric
        nics = max(1, min(gpn, f.nics_per_node or 1))
        return nics * f.rail_bw(nodes) * self.nic_eff / 1e9

    def ring_graph(self, nodes: int, gpn: int) -> Graph:
        """Channels of the ring / tree search (module docstring). Across nodes the search
        tries NCCL's network speeds and every channel enters and leaves a node through one
        NIC, so a NIC carries ``floor(NIC rate / speed)`` channels. The search's duplication
        (``ncclTopoDupChannels``): channels doubled at half speed, except below 25 GB/s a
        channel and, on Hopper and later, below 50 GB/s with more than 4 channels."""
        link = self.intra_gbs() if gpn > 1 else math.inf
        nics = max(1, min(gpn, self.fabric.nics_per_node or 1))
        per_nic = self.nic_gbs(nodes, gpn) / nics if nodes > 1 else math.inf
        most = int(self.t["max_channels"])
        best = (0, 0.0)
        table = "speed_intra_gbs" if nodes == 1 else "speed_inter_gbs"
        for s in self.t[table][self.gen]:
            by_nvlink = int(link // s) if math.isfinite(link) else most
            c = min(by_nvlink, most // 2, nics * int(per_nic // s) if nodes > 1 else most)
            if c >= 1 and c * s > best[0] * best[1] + 1e-9:
                best = (c, float(s))
        if best[0] == 0:  # slower than every search speed: one channel at the link's rate
            best = (1, min(link, per_nic))
        c0, speed = best
        late = self.gen in ("hopper", "blackwell")
        if speed < 25.0 or (late and speed < 50.0 and c0 > 4):
            return Graph(c0, speed)
        dup = min(2 * c0, most)
        return Graph(dup, speed / math.ceil(dup / c0))

    def tree_graph(self, nodes: int, gpn: int) -> Graph:
        """The tree search's channels: the ring's (``init.cc`` searches the tree with the
        ring's channel count), except on two nodes, where NCCL's second pass raises a tree's
        intra-node speed (``bwIntra``, which the tuner reads up to two nodes; beyond, it reads
        ``bwInter``, the ring's): step by step to the next faster network speed while the
        current one is below twice the network's and the NVLink carries it on every channel
        (``search.cc``: "increase bwIntra for trees")."""
        g = self.ring_graph(nodes, gpn)
        if nodes != 2 or gpn < 2:
            return g
        link = self.intra_gbs()
        faster = sorted(float(v) for v in self.t["speed_inter_gbs"][self.gen] if float(v) > g.bw)
        bw = g.bw
        for v in faster:
            if bw >= 2 * g.bw or g.channels * v > link + 1e-9:
                break
            bw = v
        return Graph(g.channels, bw, g.bw) if bw > g.bw else g

    def nvls_graph(self, nodes: int, gpn: int) -> Graph:
        """NCCL's NVLS graph: one channel per GPU of the node (``nvls_max_arity`` at most),
        each at the fastest search speed ``s`` with ``(GPUs + 1) x s`` within a GPU's
        credited NVLink rate (channel g's head pulls and pushes twice, the others once).
        Across nodes a channel's network rate is its share of the node's NICs, raised at most
        to twice ``s`` (the search's second pass stops below ``2 x bwIntra``)."""
        c = min(int(self.t["nvls_max_arity"]), gpn)
        table = "speed_intra_gbs" if nodes == 1 else "speed_inter_gbs"
        link = self.intra_gbs()
        fits = [float(v) for v in self.t[table][self.gen] if (c + 1) * float(v) <= link + 1e-9]
        speed = fits[0] if fits else link / (c + 1)
        if nodes == 1:
            return Graph(c, speed)
        return Graph(c, speed, min(self.nic_gbs(nodes, gpn) / c, 2.0 * speed))

    # ------------------------------------------------------------------ execution channels
    def execution_channels(self, nodes: int, gpn: int) -> int:
        """Channels NCCL's communicator runs (``connect.cc``): twice the ring search's
        channels, at most MAXCHANNELS; on Hopper and later across nodes a fast ring graph of
        few channels doubled once more."""
        t, ring = self.t, self.ring_graph(nodes, gpn)
        most = int(t["max_execution_channels"])
        c = min(most, 2 * ring.channels)
        if (nodes > 1 and self.gen in ("hopper", "blackwell")
                and ring.bw > float(t["execution_double_min_gbs"])
                and c < int(t["execution_double_below"])):
            c = min(most, 2 * c)
        return c

    def p2p_channels(self, nodes: int, gpn: int) -> int:
        """Point-to-point channels: the execution channels rounded up to a power of two."""
        return min(pow2_up(self.execution_channels(nodes, gpn)),
                   int(self.t["max_execution_channels"]))

    def nvlink_links(self) -> float:
        """NVLink links of one GPU (its datasheet rate over the datasheet per-link rate)."""
        return self.fabric.intra_bw / 1e9 / float(self.t["nvlink_datasheet_gbs"][self.gen])

    def p2p_nvlink_gbs(self, gpn: int, channels: int | None = None) -> float:
        """A GPU's point-to-point rate to its NVLink peers (GB/s): NCCL runs 2 channels per
        NVLink link of a peer's path, i.e. half a link's credited rate per channel, on at
        most ``channels`` channels (default: the communicator's p2p channels; fewer SMs,
        fewer channels), never beyond the credited NVLink rate."""
        c = self.p2p_channels(1, max(gpn, 2)) if channels is None else channels  # a peer
        per_link = float(self.t["nvlink_credit_gbs"][self.gen])
        per_channel = per_link / float(self.t["p2p_channels_per_nvlink"])
        return min(self.intra_gbs(), c * per_channel)

    def p2p_net_channels_per_peer(self, n: int, gpn: int) -> int:
        """Channels one remote peer's messages use (``paths.cc``): at least one per NIC of
        the GPU (one here), more to reach the NIC's rate at 14 GB/s a channel, halved while
        a round of peers (8 per channel batch) would not fit the p2p channels."""
        nodes = -(-n // gpn)
        t = self.t
        nic = self.fabric.inter_bw / 1e9
        per = max(1, math.ceil(nic / float(t["p2p_per_channel_net_gbs"])))
        per = pow2_up(per)
        total = self.p2p_channels(nodes, gpn)
        if nodes > 1:
            rounds = math.ceil(n / int(t["p2p_peers_per_batch"]))
            while per * rounds > total and per > 1:
                per //= 2
        return min(per, total)

    def collnet_graph(self, nodes: int, gpn: int) -> Graph:
        """One channel per NIC head, each at the lower of its NVLink share and its NIC."""
        heads = max(1, min(gpn, self.fabric.nics_per_node or 1))
        per_nic = self.nic_gbs(nodes, gpn) / heads
        return Graph(heads, min(self.intra_gbs() / heads if gpn > 1 else per_nic, per_nic))

    # ------------------------------------------------------------------ availability
    def allowed(self, op: str, n: int, gpn: int) -> list[tuple[str, int]]:
        """(algorithm, protocol) pairs the topology and NCCL allow for ``op`` on ``n`` ranks."""
        f = self.fabric
        nodes = -(-n // gpn)
        algs = collective_ops.get(op).nccl_algorithms
        out = []
        for a in algs:
            if a in ("nvls", "nvls_tree") and not (
                    f.nvls and f.intra_kind == "nvswitch" and op in self.nvls_ops):
                continue
            if a == "nvls" and nodes > 1 and not (f.collnet and op == "all_reduce"):
                continue
            if (a == "nvls_tree" and nodes == 1) or (a.startswith("nvls") and gpn < 2):
                continue
            if a.startswith("collnet") and (not f.collnet or nodes == 1):
                continue
            if a == "collnet_direct" and (f.intra_kind != "nvswitch" or (
                    op != "all_reduce" and gpn > (f.nics_per_node or 1))):
                continue
            if a == "pat" and (gpn != 1 or n < 2):
                continue
            for p in range(3):
                simple_only = a not in ("ring", "tree")
                if simple_only and p != SIMPLE:
                    continue
                if p == LL128 and f.intra_kind == "pcie" and gpn > 1:
                    continue
                out.append((a, p))
        return out

    # ------------------------------------------------------------------ the table
    def table(self, op: str, n: int, gpn: int) -> tuple[Entry, ...]:
        key = (op, n, gpn)
        if key not in self.memo:
            self.memo[key] = tuple(
                e for a, p in self.allowed(op, n, gpn)
                if (e := self.entry(op, a, p, n, gpn)).bandwidth_gbs > 0
            )
        return self.memo[key]

    def entry(self, op: str, a: str, p: int, n: int, gpn: int) -> Entry:
        nodes = -(-n // gpn)
        graph = self.graph_of(a, nodes, gpn)
        bw = self.bus_bw(op, a, p, n, gpn, graph)
        return Entry(a, PROTOCOLS[p], self.latency(op, a, p, n, gpn), bw, graph.channels)

    def graph_of(self, a: str, nodes: int, gpn: int) -> Graph:
        if a in ("nvls", "nvls_tree"):
            return self.nvls_graph(nodes, gpn)
        if a.startswith("collnet"):
            return self.collnet_graph(nodes, gpn)
        return self.tree_graph(nodes, gpn) if a == "tree" else self.ring_graph(nodes, gpn)

    def caps(self, key: str, nodes: int) -> float:
        return float(self.t["per_channel_max_gbs"][key][self.gen][min(nodes, 3) - 1])

    def bus_bw(self, op: str, a: str, p: int, n: int, gpn: int, g: Graph) -> float:
        """Algorithm bandwidth (GB/s) of one pair: the refinements of ``tuning.cc``."""
        t, fac = self.t, self.t["factors"]
        nodes = -(-n // gpn)
        ppn = n / nodes
        gathers = op in ("all_gather", "reduce_scatter")
        bw = g.bw
        if a in ("nvls", "nvls_tree"):
            eff = float(t["nvls_efficiency"][self.gen])
            intra = g.bw * eff * (g.channels - 1) / g.channels
            intra *= 2.0 if op == "all_reduce" else (ppn - 1) / ppn
            # NCCL doubles NVLS-tree's network rate on two nodes; we do not: a node must still
            # send the whole buffer across its boundary (the NICs' line rate bounds it).
            inter = (g.bw if g.bw_inter is None else g.bw_inter) if nodes > 1 else math.inf
            cap = self.caps("nvls_tree", nodes) if a == "nvls_tree" else math.inf
            bw = min(intra, inter, cap if cap > 0 else math.inf)
        bus = g.channels * bw
        ll_row = self.gen if nodes == 1 else "volta"  # several nodes: the (Intel) CPU's row
        ll_max = float(t["ll_max_bw_gbs"][ll_row][min(nodes, 3) - 1])
        if a == "ring" and p == LL:
            bus = min(ll_max, bus * fac["ring_ll"])
        if a == "ring" and p == LL128:
            bus = min(bus * fac["ring_ll128"], g.channels * self.caps("ring_ll128", nodes))
        if a == "tree" and op == "all_reduce":
            bus = min(bus * fac["tree_all_reduce"], g.channels * self.caps("tree", nodes))
        if a == "tree" and p == LL:
            bus = min(bus * fac["tree_ll"], ll_max)
        if a == "tree" and p == LL128:
            f = fac["tree_ll128_one_node"] if nodes == 1 else fac["tree_ll128_nodes"]
            bus = min(bus * f, g.channels * self.caps("tree_ll128", nodes))
        if a == "tree" and gpn == 1:  # one GPU a node: NCCL's search builds PATTERN_TREE
            bus *= fac["tree_pattern_tree"]
        if a == "pat":
            bus *= fac["pat"]
        if a == "collnet_direct":
            if gathers:
                bus = ppn * min(g.bw, g.bw * fac["collnet_inter"])
            else:
                ratio = ppn / g.channels
                bus /= ratio - (ratio - 1) / 2
                if self.gen in ("hopper", "blackwell"):
                    bus *= fac["collnet_direct_hopper"]
        if a != "ring" and gathers:
            return bus  # NCCL keeps these as they are (no bus -> algorithm conversion)
        nsteps = collective_ops.get(op).nccl_steps(n)
        if a in ("ring", "nvls", "nvls_tree"):
            return bus * n / max(nsteps, 1)
        return bus * float(fac["tree_bus_to_alg"])

    def latency(self, op: str, a: str, p: int, n: int, gpn: int) -> float:
        """Latency (us) of one pair: base plus per-hop latencies (module docstring)."""
        t = self.t
        nodes = -(-n // gpn)
        ppn = n // nodes
        intra_kind = "nvlink" if self.fabric.intra_kind == "nvswitch" else "pci"
        hw = intra_kind if nodes == 1 else "net"
        lat = float(t["base_latency_us"][a][p])
        intra = float(t["hw_latency_us"][intra_kind][a][p])
        inter = float(t["hw_latency_us"]["net"]["tree" if ppn == 1 else a][p])
        nsteps = collective_ops.get(op).nccl_steps(n)
        if a == "ring":
            if op in ("broadcast", "reduce"):
                return lat + float(t["hw_latency_us"][hw][a][p])
            over = 0.0
            if nodes > 1:
                over = float(t["net_overhead_us"]) * (
                    float(t["net_overhead_simple_factor"]) if p == SIMPLE else 1.0)
            intra = max(intra, over)
            n_inter = 0 if nodes == 1 else (2 * (nodes - 1) if op == "all_reduce" else nodes - 1)
            return lat + (nsteps - n_inter) * intra + n_inter * inter
        if a == "tree":
            return lat + 2 * ((ppn - 1) * intra + log2i(nodes) * inter)
        if a == "collnet_direct":
            return lat + 2 * (min(1, ppn - 1) * intra + (ppn - 1) * 0.4) + inter
        if a == "collnet_chain":
            return lat + 2 * (ppn - 1) * intra + inter
        if a == "nvls":
            return intra + (inter if nodes > 1 else 0.0)
        if a == "nvls_tree":
            return lat + intra + 2 * log2i(nodes) * inter
        return lat + log2i(nodes) * (inter / 3.5) + n * 2.8  # pat

    # ------------------------------------------------------------------ per call
    def seconds(self, e: Entry, op: str, size: np.ndarray, n: int, gpn: int) -> np.ndarray:
        """Predicted seconds of calls of ``size`` bytes (``ncclTopoGetAlgoTime``, one
        operation; vectorised over sizes)."""
        s = np.asarray(size, dtype=np.float64)
        nodes = -(-n // gpn)
        p = PROTOCOLS.index(e.protocol)
        bw = np.full(s.shape, e.bandwidth_gbs)
        lat = np.full(s.shape, e.latency_us)
        corrected = {"tree": 23, "nvls_tree": 24 if self.gen in self.t["nvls_tree_corrected"]
                     else 0}.get(e.algorithm, 0)
        if corrected and op == "all_reduce":
            k = np.floor(np.log2(np.maximum(s, 1.0) / 64.0))  # NCCL's log2i(nBytes >> 6)
            table = np.asarray(self.t["tree_correction"][p], dtype=np.float64)
            inside = (k >= 0) & (k < corrected)
            bw = np.where(inside, bw * table[np.clip(k, 0, corrected - 1).astype(int)], bw)
        if e.algorithm == "ring" and p == SIMPLE and nodes > 1 and op == "all_reduce":
            plateau = s / (e.channels * n) >= 64
            key = "ring_plateau_factor_pre_sm80" if self.gen == "volta" else "ring_plateau_factor"
            lat = np.where(plateau, lat * float(self.t[key]), lat)
        return np.asarray((lat + s / (1000.0 * bw)) * 1e-6)

    def entries(self, op: str, n: int, gpn: int, algorithm: str | None,
                protocol: str | None) -> list[Entry]:
        return [e for e in self.table(op, n, gpn)
                if (algorithm is None or e.algorithm == algorithm)
                and (protocol is None or e.protocol == protocol)]

    def times(self, op: str, size: np.ndarray, n: int, gpn: int, algorithm: str | None = None,
              protocol: str | None = None) -> np.ndarray | None:
        """The fastest allowed pair's seconds per size (None: no pair is allowed)."""
        found = self.entries(op, n, gpn, algorithm, protocol)
        if not found:
            return None
        return np.asarray(np.min([self.seconds(e, op, size, n, gpn) for e in found], axis=0))

    def launched_channels(self, e: Entry, size: float, n: int) -> int:
        """Channels a call of ``size`` launches (fewer when small; module docstring)."""
        if e.algorithm in ("nvls", "nvls_tree"):
            return e.channels
        p = PROTOCOLS.index(e.protocol)
        threads = int(self.t["max_threads"][p])
        threshold = int(self.t["thread_threshold"][p]) * (n if (e.algorithm, p) == ("ring", LL)
                                                          else 1)
        nc = e.channels
        while nc > 1 and size < nc * threads * threshold:
            nc -= 1
        return nc

    def choose(self, op: str, size: float, n: int, gpn: int,
               algorithm: str | None = None, protocol: str | None = None) -> Choice | None:
        """The fastest allowed pair (restricted to ``algorithm`` / ``protocol`` when given,
        the ``NCCL_ALGO`` / ``NCCL_PROTO`` analogues); None when no pair remains."""
        found = self.entries(op, n, gpn, algorithm, protocol)
        if not found:
            return None
        sizes = np.array([float(size)])
        timed = [(float(self.seconds(e, op, sizes, n, gpn)[0]), i) for i, e in enumerate(found)]
        secs, i = min(timed)
        e = found[i]
        return Choice(e.algorithm, e.protocol, self.launched_channels(e, size, n), secs)

    def algorithms(self, op: str, n: int, gpn: int) -> list[str]:
        """NCCL algorithms allowed for ``op`` on this layout (tuner order)."""
        return list(dict.fromkeys(e.algorithm for e in self.table(op, n, gpn)))

    def p2p_protocol(self, message: float) -> str:
        """Point-to-point protocol of one message (LL up to NCCL's P2P LL threshold)."""
        return "LL" if message <= float(self.t["p2p_ll_threshold"]) else "Simple"


def check_override(fabric: Fabric, algorithm: str | None, protocol: str | None) -> None:
    """Bad input before any work: an unknown name, NVLS on a node without NVLink SHARP,
    CollNet without an in-network-reduction level, LL128 over PCIe."""
    if algorithm is not None:
        known = (*ALGORITHMS, "direct", "hierarchical", "multilevel")
        if algorithm not in known:
            raise InputError("comm.algorithm", algorithm, " | ".join(known))
        if algorithm.startswith("nvls") and not (fabric.nvls and fabric.intra_kind == "nvswitch"):
            raise InputError("comm.algorithm", algorithm,
                             "an algorithm this topology's node runs (no NVLink SHARP here)")
        if algorithm.startswith("collnet") and not fabric.collnet:
            raise InputError("comm.algorithm", algorithm, "an algorithm this topology runs "
                             "(no level declares in_network_reduction)")
    if protocol is not None:
        if protocol not in PROTOCOLS:
            raise InputError("comm.protocol", protocol, " | ".join(PROTOCOLS))
        if protocol == "LL128" and fabric.intra_kind == "pcie":
            raise InputError("comm.protocol", protocol, "LL | Simple (NCCL runs no LL128 "
                             "over PCIe)")
