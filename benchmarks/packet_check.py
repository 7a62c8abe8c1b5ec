"""Packet-level cross-check of the flow model on one small fabric (ns-3 against the flow model).

    pip install -e ".[packet]"   # the PyPI ns3 package (optional; never needed by make test)
    python benchmarks/packet_check.py [--sizes 262144 2097152 16777216] [--link-gbps 10]

The fabric: 8 hosts (one GPU and one NIC each) on two leaves of 4, every leaf wired to two
spines at 2:1 oversubscription (uplinks of ``4 x link / 2 / 2`` each), built once as a
libra-des topology (``leaf`` + ``spine`` levels) for the flow model and mirrored link by link
in ns-3. Each flow takes in ns-3 the spine the flow model's route takes (per-pair host
aliases with static routes), so both models see the same paths.

Patterns, each at three sizes (bytes per pair): ``incast`` (7 hosts to host 0),
``all_to_all`` (every ordered pair), ``all_to_allv`` (all-to-all with host 0 a hot receiver:
every sender sends it four times as much). Printed per case: makespan in both models, its
error, the median and worst per-flow completion error, and the wall-time ratio (ns-3 over
the flow model).

What TCP stands in for RoCE: ns-3 has no RoCEv2 / PFC model, so the packet side runs TCP
DCTCP with ECN marking at a RED queue (``K`` = 65 packets, the DCTCP paper's 10 Gb/s value)
and buffers deep enough that nothing is dropped: lossless delivery as PFC gives RoCE, and an
ECN-driven rate control as DCQCN gives it. TCP still differs: slow start and ACK clocking (a
ramp RoCE's line-rate start does not have), 52 bytes of TCP/IP header per 1448-byte segment
(RoCE: 58 per up to 4 KiB), and no PFC pause spreading congestion upstream.

Skips with one line where ``ns3`` is not installed.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

HOSTS, PER_LEAF, SPINES, OVERSUB = 8, 4, 2, 2
SIZES = (256 * 1024, 2 * 1024 * 1024, 16 * 1024 * 1024)


@dataclass(frozen=True)
class Case:
    pattern: str
    size: int
    pairs: tuple[tuple[int, int, float], ...]  # (src, dst, bytes)


def cases(sizes: tuple[int, ...]) -> list[Case]:
    out = []
    for size in sizes:
        incast = tuple((s, 0, float(size)) for s in range(1, HOSTS))
        a2a = tuple((s, d, float(size)) for s in range(HOSTS) for d in range(HOSTS) if s != d)
        hot = tuple((s, d, float(size) * (4 if d == 0 else 1)) for s, d, _ in a2a)
        out += [Case("incast", size, incast), Case("all_to_all", size, a2a),
                Case("all_to_allv", size, hot)]
    return out


def topology_spec(link_gbps: float) -> dict[str, Any]:
    """The fabric as a libra-des topology: one GPU and one NIC per node (a host)."""
    return {
        "name": "packet-check", "nodes": HOSTS, "gpus_per_node": 1,
        "levels": [
            {"type": "nvswitch", "bandwidth": "450GB/s", "latency": "0us", "nics": 1,
             "pcie": {"switches": 1, "link": {"type": "pcie", "bandwidth": "64GB/s"}}},
            {"type": "leaf", "link": "roce", "bandwidth": f"{link_gbps}Gb/s", "latency": "1us",
             "fan_out": PER_LEAF, "oversubscription": OVERSUB},
            {"type": "spine", "link": "roce", "count": SPINES, "latency": "1us"},
        ],
    }


def flow_model(spec: dict[str, Any], case: Case) -> tuple[dict[tuple[int, int], float], Any]:
    """Per-flow completion times (s) in the flow model, all flows started at t = 0."""
    import simpy

    from libra_des.hardware.fabric.topology import load_topology
    from libra_des.sim.network.flow.flow_model import Network

    topo = load_topology(spec)
    env = simpy.Environment()
    net = Network(env, topo, replay=False)
    done: dict[tuple[int, int], float] = {}

    def finish(key: tuple[int, int]) -> Callable[[Any], None]:
        return lambda _e: done.__setitem__(key, env.now)

    events = []
    for s, d, nbytes in case.pairs:
        ev = net.transfer(s, d, nbytes)
        ev.callbacks.append(finish((s, d)))
        events.append(ev)
    env.run(env.all_of(events))
    return done, topo


def spine_of(topo: Any, src: int, dst: int) -> int | None:
    """The spine index the flow model routes ``src -> dst`` through (None: same leaf)."""
    for a, b in topo.route(src, dst):
        for name in (a, b):
            if "spine" in str(name):
                digits = "".join(ch for ch in str(name).split("spine")[-1] if ch.isdigit())
                return int(digits or 0) % SPINES
    return None


def packet_model(case: Case, topo: Any, link_gbps: float) -> dict[tuple[int, int], float]:
    """Per-flow completion times (s) in ns-3 (TCP DCTCP, ECN at RED, no drops)."""
    from ns import ns

    ns.Config.SetDefault("ns3::TcpL4Protocol::SocketType", ns.StringValue("ns3::TcpDctcp"))
    ns.Config.SetDefault("ns3::TcpSocket::SegmentSize", ns.UintegerValue(1448))
    ns.Config.SetDefault("ns3::TcpSocket::SndBufSize", ns.UintegerValue(1 << 24))
    ns.Config.SetDefault("ns3::TcpSocket::RcvBufSize", ns.UintegerValue(1 << 24))
    ns.Config.SetDefault("ns3::RedQueueDisc::UseEcn", ns.BooleanValue(True))
    ns.Config.SetDefault("ns3::RedQueueDisc::UseHardDrop", ns.BooleanValue(False))
    ns.Config.SetDefault("ns3::RedQueueDisc::MinTh", ns.DoubleValue(65))
    ns.Config.SetDefault("ns3::RedQueueDisc::MaxTh", ns.DoubleValue(65))
    ns.Config.SetDefault("ns3::RedQueueDisc::MaxSize", ns.QueueSizeValue(
        ns.QueueSize("100000p")))
    hosts, leaves, spines = ns.NodeContainer(), ns.NodeContainer(), ns.NodeContainer()
    hosts.Create(HOSTS)
    leaves.Create(HOSTS // PER_LEAF)
    spines.Create(SPINES)
    ns.InternetStackHelper().Install(hosts)
    ns.InternetStackHelper().Install(leaves)
    ns.InternetStackHelper().Install(spines)
    up_gbps = PER_LEAF * link_gbps / OVERSUB / SPINES
    tch = ns.TrafficControlHelper()
    tch.SetRootQueueDisc("ns3::RedQueueDisc")
    addr = ns.Ipv4AddressHelper()
    subnet = [0]

    def wire(a: Any, b: Any, gbps: float) -> tuple[Any, Any]:
        p2p = ns.PointToPointHelper()
        p2p.SetDeviceAttribute("DataRate", ns.StringValue(f"{gbps}Gbps"))
        p2p.SetChannelAttribute("Delay", ns.StringValue("1us"))
        devs = p2p.Install(a, b)
        tch.Install(devs)
        addr.SetBase(ns.Ipv4Address(f"10.{subnet[0] // 256}.{subnet[0] % 256}.0"),
                     ns.Ipv4Mask("255.255.255.252"))
        subnet[0] += 1
        return devs, addr.Assign(devs)

    host_if = [wire(hosts.Get(h), leaves.Get(h // PER_LEAF), link_gbps) for h in range(HOSTS)]
    for leaf in range(HOSTS // PER_LEAF):
        for sp in range(SPINES):
            wire(leaves.Get(leaf), spines.Get(sp), up_gbps)
    ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()
    aliases = pin_routes(ns, case, topo, hosts, leaves, spines, host_if)
    sinks, port = [], 5000
    for s, d, nbytes in case.pairs:
        port += 1
        sink = ns.PacketSinkHelper("ns3::TcpSocketFactory", ns.InetSocketAddress(
            ns.Ipv4Address.GetAny(), port).ConvertTo())
        sinks.append(sink.Install(hosts.Get(d)))
        bulk = ns.BulkSendHelper("ns3::TcpSocketFactory", ns.InetSocketAddress(
            aliases[s, d], port).ConvertTo())
        bulk.SetAttribute("MaxBytes", ns.UintegerValue(int(nbytes)))
        bulk.SetAttribute("SendSize", ns.UintegerValue(1448 * 16))
        bulk.Install(hosts.Get(s)).Start(ns.Seconds(0.0))
    monitor_helper = ns.FlowMonitorHelper()
    monitor = monitor_helper.InstallAll()
    ns.Simulator.Stop(ns.Seconds(30.0))
    ns.Simulator.Run()
    classifier = monitor_helper.GetClassifier()
    back = {str(v): k for k, v in aliases.items()}
    done: dict[tuple[int, int], float] = {}
    for flow_id, stats in monitor.GetFlowStats():
        tup = classifier.__deref__().FindFlow(flow_id) if hasattr(classifier, "__deref__") \
            else classifier.FindFlow(flow_id)
        key = back.get(str(tup.destinationAddress))
        if key is not None and stats.rxBytes > 0:
            done[key] = stats.timeLastRxPacket.GetSeconds()
    ns.Simulator.Destroy()
    return done


def pin_routes(ns: Any, case: Case, topo: Any, hosts: Any, leaves: Any, spines: Any,
               host_if: list[tuple[Any, Any]]) -> dict[tuple[int, int], Any]:
    """Give each (src, dst) pair its own address on ``dst`` and pin it to the flow model's
    spine with static host routes on the leaves and spines."""
    aliases = {}
    static = ns.Ipv4StaticRoutingHelper()
    for s, d, _ in case.pairs:
        alias = ns.Ipv4Address(f"10.200.{s}.{d + 1}")
        ipv4 = hosts.Get(d).GetObject[ns.Ipv4]()
        ipv4.AddAddress(1, ns.Ipv4InterfaceAddress(alias, ns.Ipv4Mask("255.255.255.255")))
        aliases[s, d] = alias
        src_leaf, dst_leaf = s // PER_LEAF, d // PER_LEAF
        host_port = 1 + d % PER_LEAF  # leaf interface 0 is loopback, hosts first
        if src_leaf == dst_leaf:
            route = static.GetStaticRouting(leaves.Get(src_leaf).GetObject[ns.Ipv4]())
            route.AddHostRouteTo(alias, host_port)
            continue
        sp = spine_of(topo, s, d) or 0
        up = static.GetStaticRouting(leaves.Get(src_leaf).GetObject[ns.Ipv4]())
        up.AddHostRouteTo(alias, 1 + PER_LEAF + sp)
        mid = static.GetStaticRouting(spines.Get(sp).GetObject[ns.Ipv4]())
        mid.AddHostRouteTo(alias, 1 + dst_leaf)
        down = static.GetStaticRouting(leaves.Get(dst_leaf).GetObject[ns.Ipv4]())
        down.AddHostRouteTo(alias, host_port)
    return aliases


def compare(case: Case, spec: dict[str, Any], link_gbps: float) -> str:
    t0 = time.perf_counter()
    flows, topo = flow_model(spec, case)
    t1 = time.perf_counter()
    packets = packet_model(case, topo, link_gbps)
    t2 = time.perf_counter()
    keys = [k for k in flows if k in packets]
    errors = np.array([packets[k] / flows[k] - 1 for k in keys]) if keys else np.array([np.nan])
    span_f, span_p = max(flows.values()), max(packets.values(), default=float("nan"))
    return (f"| {case.pattern} | {case.size // 1024} KiB | {span_f * 1e3:.3f} | "
            f"{span_p * 1e3:.3f} | {span_p / span_f - 1:+.1%} | "
            f"{np.median(np.abs(errors)):.1%} | {np.max(np.abs(errors)):.1%} | "
            f"{(t2 - t1) / max(t1 - t0, 1e-9):.0f}x |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs=3, default=list(SIZES))
    ap.add_argument("--link-gbps", type=float, default=10.0)
    args = ap.parse_args()
    if importlib.util.find_spec("ns") is None:
        print("skipped: ns-3 is not installed (pip install -e '.[packet]')")
        return
    spec = topology_spec(args.link_gbps)
    print("| pattern | bytes per pair | flow model ms | ns-3 ms | makespan error | "
          "per-flow median abs error | per-flow worst | ns-3 / flow wall |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for case in cases(tuple(args.sizes)):
        print(compare(case, spec, args.link_gbps), flush=True)


if __name__ == "__main__":
    main()
