"""Routes put together from memoised segments number every link as a link-by-link walk of
the topology's routes does (same numbers, same order), on every shipped fabric shape."""

from __future__ import annotations

import numpy as np
import pytest
import simpy

from libra_des.errors import InputError
from libra_des.hardware.fabric.routing import Routing
from libra_des.hardware.fabric.topology import LinkId, Topology, load_topology
from libra_des.sim.network.flow.flow_model import Network
from libra_des.sim.network.flow.routes import RouteNumbers

CASES = [
    ("h200-roce-railopt", {"nodes": 16}, "ecmp", True),
    ("h200-roce-railopt", {"nodes": 16}, "ecmp", False),
    ("h200-roce-railopt", {"nodes": 16}, "spray", True),
    ("h200-roce-railopt-2to1", {"nodes": 8}, "ecmp", True),
    ("h100-ib-3tier", {}, "ecmp", False),
    ("h100-ib-3tier", {}, "spray", True),
    ("a100-dgx-ib-hdr", {"nodes": 8}, "ecmp", True),
    ("pcie-8x", {}, "ecmp", False),
    ("gb200-nvl72", {}, "ecmp", False),
    ("h200-8x-nvswitch", {}, "ecmp", False),
]


def walked(topo: Topology, src: int, dst: int, relay: bool) -> list[LinkId]:
    """The route's links from the topology itself (the reference)."""
    return list(topo.p2p_route(src, dst) if relay else topo.route(src, dst))


class Numbering:
    """Links numbered in order of first sight."""

    def __init__(self) -> None:
        self.index: dict[LinkId, int] = {}

    def __call__(self, link: LinkId) -> int:
        return self.index.setdefault(link, len(self.index))


def pairs(topo: Topology, count: int, seed: int) -> list[tuple[int, int, bool]]:
    rng = np.random.default_rng(seed)
    n = topo.num_gpus
    src, dst = rng.integers(0, n, count), rng.integers(0, n, count)
    relay = rng.random(count) < 0.5
    return [(int(s), int(d), bool(r)) for s, d, r in zip(src, dst, relay, strict=True)
            if s != d]


@pytest.mark.parametrize(("name", "params", "mode", "pxn"), CASES)
def test_segments_number_as_the_walk(
    name: str, params: dict[str, int], mode: str, pxn: bool
) -> None:
    base = load_topology(name, params)
    topo = base.routed(Routing.sample(mode, 3)).relaying(pxn)  # type: ignore[arg-type]
    walk, built = Numbering(), Numbering()
    numbers = RouteNumbers(topo, built)
    checked = 0
    for src, dst, relay in pairs(topo, 3000, 11):
        via = topo.proxy(src, dst) if relay else None
        expect = [walk(link) for link in walked(topo, src, dst, relay and via is not None)]
        assert numbers.of(src, dst, via) == expect, (src, dst, relay)
        checked += 1
    assert checked > 2000
    assert walk.index == built.index


def test_segments_are_shared() -> None:
    """PXN routes between the nodes under one set of leaves reuse segments: one segment
    into each GPU, and an empty climb and descent (one leaf per rail) for every route."""
    topo = load_topology("h200-roce-railopt", {"nodes": 16}).relaying(True)
    numbers = RouteNumbers(topo, Numbering())
    gpus = 4 * topo.gpus_per_node
    routes = 0
    for src in range(gpus):
        for dst in range(gpus):
            if src // topo.gpus_per_node != dst // topo.gpus_per_node:
                segments = numbers.segments(src, dst, topo.proxy(src, dst))
                assert segments[1:3] == ((), ())
                routes += 1
    assert len(numbers._down) == gpus < routes
    assert not numbers._switches


def test_a_relayed_path_to_no_gpu_is_refused() -> None:
    topo = load_topology("h200-roce-railopt", {"nodes": 2}).relaying(True)
    net = Network(simpy.Environment(), topo)
    with pytest.raises(InputError, match="gpu"):
        net.path(0, topo.num_gpus, relay=True)
