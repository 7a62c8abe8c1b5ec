"""DeepEP's published intranode / internode / low-latency tables, reproduced from the model.

Published values: DeepEP V1 performance tables (github.com/deepseek-ai/DeepEP, docs/legacy.md,
"Performance"). Hardware there: H800 (NVLink ~160 GB/s achievable; datasheet 400 GB/s
bidirectional, 200 GB/s a direction), one ConnectX-7 400 Gb/s InfiniBand NIC per GPU
(~50 GB/s), 8 GPUs a node. Modelled on ``h100-ib-ndr`` with the NVLink rate set to H800's
datasheet figure and the ``h100-sxm`` profile (H800 is H100 silicon), seed 0. Nothing is
fitted to these tables.

Measured as DeepEP's own tests measure (``tests/legacy/test_intranode.py``,
``test_internode.py``, ``test_low_latency.py``; their defaults: 4096 tokens a rank for the
normal kernels, 128 for low latency, hidden 7168, 256 experts, top-8, 24 SMs, FP8 dispatch
of ``hidden * (1 + 4/128)`` bytes a token, BF16 combine), one rank's bytes over its time:

* intranode: the tokens a rank *receives*, one per token that picks any of its experts, its
  own tokens included (``recv_x.numel()``); routing top-8 of 256 uniform scores;
* internode: the tokens a rank *sends over RDMA*, one per (token, node) pair that the token
  picks, its own node included (``num_rdma_token_sent``); experts grouped by node, each
  token first picks ``min(nodes, 4)`` nodes (the highest per-node maximum score: uniform),
  then top-8 of their experts;
* low latency: every (token, expert) selection, ``hidden + hidden/128 * 4 + 16`` bytes FP8
  or ``2 * hidden`` BF16, none deduplicated and none excluded; EP 8 is one node of 8 GPUs,
  wider groups are ``EP/8`` nodes (peers on the node over NVLink).

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

EXPERTS, TOP_K, HIDDEN, GPN = 256, 8, 7168, 8
FP8_TOKEN = HIDDEN * (1 + 4 / 128)  # DeepEP's fp8_factor: FP8 values and an fp32 scale per 128
LL_FP8_TOKEN = HIDDEN + HIDDEN / 128 * 4 + 16  # low-latency message: + 16 bytes of metadata
BF16_TOKEN = 2 * HIDDEN
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


def routing(ep: int, tokens: int, top_groups: int, rng: np.random.Generator) -> np.ndarray:
    """``[T, k]`` experts per token; with ``top_groups`` > 0 the experts are grouped by node
    and each token first picks ``top_groups`` nodes (DeepEP's internode test)."""
    t = ep * tokens
    if not top_groups:
        return np.argsort(rng.random((t, EXPERTS)), axis=1)[:, :TOP_K]
    groups = ep // GPN
    per = EXPERTS // groups
    chosen = np.argsort(rng.random((t, groups)), axis=1)[:, :top_groups]
    pick = np.argsort(rng.random((t, top_groups * per)), axis=1)[:, :TOP_K]
    return chosen[np.arange(t)[:, None], pick // per] * per + pick % per


def measured_tokens(kind: str, routed: np.ndarray, origin: np.ndarray, ep: int) -> float:
    """Tokens a rank counts in DeepEP's printed bandwidth (mean over ranks)."""
    gpu = deepep.expert_gpu(EXPERTS, ep)[routed]
    unit = gpu if kind == "intranode" else gpu // GPN  # receiving rank, or node sent to
    width = ep if kind == "intranode" else ep // GPN
    hit = np.zeros((routed.shape[0], width), dtype=bool)
    hit[np.repeat(np.arange(routed.shape[0]), TOP_K), unit.ravel()] = True
    if kind == "intranode":  # received: count at the receiving rank
        return float(hit.sum()) / ep
    return float(np.bincount(origin, weights=hit.sum(axis=1), minlength=ep).mean())


def error(model: float, published: float) -> str:
    return f"{100 * (model / published - 1):+.0f}%"


def normal_rows(rng: np.random.Generator) -> list[float]:
    errs = []
    print("normal kernels (GB/s: intranode NVLink received, internode RDMA sent, per rank)")
    print("| type | EP | dispatch published | model | error | combine published | model | error |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for kind, ep, pub_d, pub_c in NORMAL:
        cost = cost_model(max(ep // GPN, 1))
        routed = routing(ep, 4096, 0 if kind == "intranode" else min(ep // GPN, 4), rng)
        origin = np.repeat(np.arange(ep), 4096)
        gpn = min(ep, GPN)
        rd, nv = deepep.normal_traffic(routed, origin, EXPERTS, ep, gpn, 1.0)
        tokens = measured_tokens(kind, routed, origin, ep)
        got = []
        for size, (r, n) in ((FP8_TOKEN, (rd, nv)), (BF16_TOKEN, (rd.T, nv.T))):
            s = deepep.seconds(cost, deepep.NORMAL, r * size, n * size, gpn)  # combine: reversed
            got.append(tokens * size / s / 1e9)
        errs += [got[0] / pub_d - 1, got[1] / pub_c - 1]
        print(f"| {kind} | {ep} | {pub_d:.0f} | {got[0]:.0f} | {error(got[0], pub_d)} | "
              f"{pub_c:.0f} | {got[1]:.0f} | {error(got[1], pub_c)} |")
    return errs


def low_latency_rows(rng: np.random.Generator) -> list[float]:
    errs = []
    print("\nlow-latency kernels (latency us; GB/s: every selection's bytes per rank)")
    print("| EP | dispatch us published | model | error | GB/s published | model | "
          "combine us published | model | error | GB/s published | model |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for ep, d_us, d_bw, c_us, c_bw in LOW_LATENCY:
        cost = cost_model(max(ep // GPN, 1))
        routed = routing(ep, 128, 0, rng)
        origin = np.repeat(np.arange(ep), 128)
        m = deepep.low_latency_traffic(routed, origin, EXPERTS, ep, 1.0)
        gpn = min(ep, GPN)
        s_d = deepep.seconds(cost, deepep.LOW_LATENCY, m * LL_FP8_TOKEN, m * 0, gpn)
        s_c = deepep.seconds(cost, deepep.LOW_LATENCY, m.T * BF16_TOKEN, m * 0, gpn)
        sel = 128 * TOP_K  # selections a rank sends, its own GPU's included
        bw_d, bw_c = sel * LL_FP8_TOKEN / s_d / 1e9, sel * BF16_TOKEN / s_c / 1e9
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
