"""DeepEP's published intranode / internode / low-latency tables, reproduced from the model.

Published values: DeepEP V1 performance tables (github.com/deepseek-ai/DeepEP, docs/legacy.md,
"Performance"; read through the search tool's copy of the repository). Hardware there: H800
(NVLink ~160 GB/s achievable; datasheet 400 GB/s bidirectional, 200 GB/s a direction), one
ConnectX-7 400 Gb/s InfiniBand NIC per GPU (~50 GB/s). Normal kernels: 4096 tokens per GPU,
hidden 7168, 256 experts, top-4 groups, top-8 experts, FP8 dispatch, BF16 combine; low-latency
kernels: 128 tokens per GPU, same model. Modelled on ``h100-ib-ndr`` with the NVLink rate set
to H800's datasheet figure and the ``h100-sxm`` profile (H800 is H100 silicon), routing drawn
uniformly (group-limited for the normal kernels), seed 0. Nothing is fitted to these tables.

Prints, per point, the published and the modelled bandwidth (and latency for low-latency)
with the error.

    nice .venv/bin/python benchmarks/deepep_tables.py
"""

from __future__ import annotations

import numpy as np

from libra_des.hardware.collectives import deepep
from libra_des.hardware.costs import CostModel
from libra_des.hardware.fabric.topology import load_topology, read_spec
from libra_des.hardware.profiles.profile import load_profile

EXPERTS, TOP_K, GROUPS, TOP_GROUPS, HIDDEN = 256, 8, 8, 4, 7168
FP8_TOKEN = HIDDEN + HIDDEN // 128 * 4  # FP8 values plus one fp32 scale per 128
BF16_TOKEN = 2 * HIDDEN
GPN = 8
#: (kind, EP, dispatch GB/s, combine GB/s) of the normal kernels' table.
NORMAL = (("intranode", 8, 153.0, 158.0), ("internode", 16, 43.0, 43.0),
          ("internode", 32, 58.0, 57.0), ("internode", 64, 51.0, 50.0))
#: (EP, dispatch us, dispatch GB/s, combine us, combine GB/s) of the low-latency table.
LOW_LATENCY = ((8, 77, 98, 114, 127), (16, 118, 63, 195, 74), (32, 155, 48, 273, 53),
               (64, 173, 43, 314, 46), (128, 192, 39, 369, 39), (256, 194, 39, 360, 40))


def cost_model(nodes: int) -> CostModel:
    spec = read_spec("h100-ib-ndr")
    levels = [dict(level) for level in spec["levels"]]
    levels[0]["bandwidth"] = "200GB/s"  # H800: NVLink 400 GB/s bidirectional (datasheet)
    spec = {**spec, "levels": levels, "nodes": nodes, "name": "h800-ib-ndr"}
    return CostModel(load_profile("h100-sxm"), load_topology(spec).fabric())


def routing(ep: int, tokens: int, grouped: bool, rng: np.random.Generator) -> np.ndarray:
    """``[T, k]`` experts per token (top-4 of 8 expert groups first when ``grouped``)."""
    t = ep * tokens
    if not grouped:
        return np.argsort(rng.random((t, EXPERTS)), axis=1)[:, :TOP_K]
    per = EXPERTS // GROUPS
    groups = np.argsort(rng.random((t, GROUPS)), axis=1)[:, :TOP_GROUPS]
    pick = np.argsort(rng.random((t, TOP_GROUPS * per)), axis=1)[:, :TOP_K]
    return groups[np.arange(t)[:, None], pick // per] * per + pick % per


def error(model: float, published: float) -> str:
    return f"{100 * (model / published - 1):+.0f}%"


def normal_rows(rng: np.random.Generator) -> list[float]:
    errs = []
    print("normal kernels (GB/s, bottleneck link per GPU)")
    print("| type | EP | dispatch published | model | error | combine published | model | error |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for kind, ep, pub_d, pub_c in NORMAL:
        cost = cost_model(max(ep // GPN, 1))
        routed = routing(ep, 4096, True, rng)
        origin = np.repeat(np.arange(ep), 4096)
        gpn = min(ep, GPN)
        rd, nv = deepep.normal_traffic(routed, origin, EXPERTS, ep, gpn, 1.0)
        link = nv if kind == "intranode" else rd
        got = []
        for size in (FP8_TOKEN, BF16_TOKEN):
            if size == FP8_TOKEN:
                s = deepep.seconds(cost, deepep.NORMAL, rd * size, nv * size, gpn)
            else:  # combine: the same paths backwards
                s = deepep.seconds(cost, deepep.NORMAL, rd.T * size, nv.T * size, gpn)
            got.append(float(link.sum(axis=0).mean()) * size / s / 1e9)
        errs += [got[0] / pub_d - 1, got[1] / pub_c - 1]
        print(f"| {kind} | {ep} | {pub_d:.0f} | {got[0]:.0f} | {error(got[0], pub_d)} | "
              f"{pub_c:.0f} | {got[1]:.0f} | {error(got[1], pub_c)} |")
    return errs


def low_latency_rows(rng: np.random.Generator) -> list[float]:
    errs = []
    print("\nlow-latency kernels (latency us, RDMA GB/s)")
    print("| EP | dispatch us published | model | error | GB/s published | model | "
          "combine us published | model | error | GB/s published | model |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for ep, d_us, d_bw, c_us, c_bw in LOW_LATENCY:
        cost = cost_model(ep)  # one GPU a node in the pure-RDMA layout
        routed = routing(ep, 128, False, rng)
        origin = np.repeat(np.arange(ep), 128)
        m = deepep.low_latency_traffic(routed, origin, EXPERTS, ep, 1.0)
        recv = float(m.sum(axis=0).mean())
        s_d = deepep.seconds(cost, deepep.LOW_LATENCY, m * FP8_TOKEN, m * 0, 1)
        s_c = deepep.seconds(cost, deepep.LOW_LATENCY, m.T * BF16_TOKEN, m * 0, 1)
        bw_d, bw_c = recv * FP8_TOKEN / s_d / 1e9, recv * BF16_TOKEN / s_c / 1e9
        errs += [s_d * 1e6 / d_us - 1, s_c * 1e6 / c_us - 1]
        print(f"| {ep} | {d_us} | {s_d * 1e6:.0f} | {error(s_d * 1e6, d_us)} | {d_bw} | "
              f"{bw_d:.0f} | {c_us} | {s_c * 1e6:.0f} | {error(s_c * 1e6, c_us)} | {c_bw} | "
              f"{bw_c:.0f} |")
    return errs


def main() -> None:
    rng = np.random.default_rng(0)
    errs = normal_rows(rng) + low_latency_rows(rng)
    print(f"\n{len(errs)} points: median |error| {100 * np.median(np.abs(errs)):.0f}%, "
          f"max {100 * np.max(np.abs(errs)):.0f}%")


if __name__ == "__main__":
    main()
