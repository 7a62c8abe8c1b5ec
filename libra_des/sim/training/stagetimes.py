"""Per-op durations of every pipeline device, computed in one pass per device (op_kernel).

For device ``d`` the arrays have shape ``[E, n_ops]`` (pipelines x ops in the device's order).
Noise is drawn per worker, per layer and per part (pre-attention, attention, post-attention)
from the variance model, so a pool's op lasts as long as its slowest worker in every layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from libra_des.hardware.variance.model import VarianceModel
from libra_des.plan.step import StepPlan
from libra_des.sim.training.opcost import LinearCosts, SlotAttention
from libra_des.sim.training.overlap import Factors
from libra_des.sim.training.schedules import Schedule


@dataclass(frozen=True)
class DeviceTimes:
    """Durations and breakdowns of one pipeline device's ops, per pipeline entity."""

    duration: np.ndarray  # [E, n] seconds the entity is busy with the op
    attn_compute: np.ndarray  # [E, n] per-GPU mean attention compute seconds
    attn_exposed: np.ndarray  # [E, n] per-GPU mean attention comm on the critical path
    attn_hidden: np.ndarray  # [E, n] per-GPU mean attention comm overlapped with compute
    pool_wait: np.ndarray  # [E, n] per-GPU mean lockstep wait (pool / CP barrier)
    other_comm: np.ndarray  # [E, n] exposed expert-parallel all-to-all seconds
    straggler: np.ndarray  # [E, n, L] slowest worker's attention time per layer call
    layers: np.ndarray  # [n] layers each op covers
    pair_heads: np.ndarray  # [E, n] attention pair-heads the op's durations were costed for
    linear_share: np.ndarray  # [E, n] layers x token share the linear work was costed for
    # Per-layer lockstep parts, kept for the detailed mode which replays them as events:
    pre: np.ndarray  # [E, n, L] slowest worker's pre-attention work
    compute_max: np.ndarray  # [E, n, L] slowest worker's attention compute (all chunks)
    post: np.ndarray  # [E, n, L] slowest worker's post-attention work incl. expert all-to-all
    # Interference (zero with ``overlap.interference: off``): per-GPU mean seconds the
    # Pipeliner's compute chunks and transfers were stretched by running beside each other.
    interf_compute: np.ndarray  # [E, n]
    interf_comm: np.ndarray  # [E, n]
    # The attribution's parts (results/attribution.py), per-GPU means per op: the linear
    # phases as run (noise and host gaps in) and without noise, the attention phase's share
    # of ``pool_wait``, and the attention compute as priced (no noise, no interference).
    linear: np.ndarray  # [E, n]
    linear_clean: np.ndarray  # [E, n]
    attn_wait: np.ndarray  # [E, n]
    attn_clean: np.ndarray  # [E, n]


@dataclass(frozen=True)
class Layout:
    """Where entity workers sit: GPU id = (stage * dp + replica) * cp + cp_rank."""

    dp: int
    cp: int
    pool: int
    layers: int

    def stage_gpus(self, device: int, pipelines: int) -> np.ndarray:
        """[E * W] GPU ids of device ``device`` (entity-major, worker-minor)."""
        width = self.pool * self.cp
        return device * self.dp * self.cp + np.arange(pipelines * width)

    def layers_of(self, schedule: Schedule, device: int, chunk: int) -> int:
        """Layers of one virtual stage; the remainder goes to the first virtual stages."""
        stages = schedule.stages * schedule.virtual
        vs = chunk * schedule.stages + device
        return self.layers // stages + (1 if vs < self.layers % stages else 0)


def device_times(
    plan: StepPlan,
    schedule: Schedule,
    device: int,
    lin: LinearCosts,
    att: SlotAttention,
    layout: Layout,
    noise: tuple[VarianceModel, np.random.Generator, int],
    overlap: Factors | None = None,
) -> DeviceTimes:
    """Durations of all ops of ``device`` for every pipeline entity (``overlap``: the
    Pipeliner's interference factors, None when overlap is free), in one pass
    (:func:`~libra_des.sim.training.op_kernel.op_times`)."""
    from libra_des.sim.training import op_kernel  # numba only where a step is costed

    d = draws(plan, schedule, device, lin, layout, noise)
    n, lmax, e_count, width = d.is_f.size, d.noise.shape[1], plan.pipelines, d.noise.shape[4]
    is_f, mb, layers, xf, gaps, share = d.is_f, d.mb, d.layers, d.links, d.gaps, d.share
    comp = np.where(is_f[None, :, None], att.compute_fwd[:, mb], att.compute_bwd[:, mb])
    redo = recomputed(att, is_f, mb)
    per_op, per_layer = op_kernel.op_times(
        comp, redo,
        op_comm(att, is_f, mb),
        np.ascontiguousarray(d.noise, dtype=np.float64),
        np.zeros((0, 1, 1)) if xf is None else np.ascontiguousarray(xf).reshape(n, lmax, e_count),
        np.zeros((0, 1, 1, 1)) if gaps is None
        else np.ascontiguousarray(gaps).reshape(n, lmax, e_count, width),
        linear_parts(lin, is_f, share),
        expert_parts(lin, schedule, device, layout, is_f, lmax),
        layers, att.chunks,
        np.zeros(0) if overlap is None else np.array([overlap.kernel, overlap.comm]),
    )
    return DeviceTimes(
        **dict(zip(op_kernel.PER_OP, per_op, strict=True)),
        **dict(zip(op_kernel.PER_LAYER, per_layer, strict=True)),
        pair_heads=att.pair_heads[:, mb] * layers[None, :],
        linear_share=share * layers[None, :],
        layers=layers,
        attn_clean=clean_compute(comp, redo, layers),
    )


def clean_compute(comp: np.ndarray, redo: np.ndarray, layers: np.ndarray) -> np.ndarray:
    """[E, n] per-GPU mean attention compute of each op as priced: no noise, no interference
    (a full recomputation's forward included before a backward)."""
    out = comp.mean(axis=2)
    if redo.shape[0] > 0:
        out = out + redo.mean(axis=2)
    result: np.ndarray = out * layers[None, :]
    return result


class Draws(NamedTuple):
    """One device's ops and the noise drawn for them, in the stream's order."""

    is_f: np.ndarray  # [n] forward ops
    mb: np.ndarray  # [n] microbatch of each op
    layers: np.ndarray  # [n] layers each op covers
    noise: np.ndarray  # [n, L, 3, E, W] factors: before attention, attention compute, after
    links: np.ndarray | None  # [n * L, E] link factor of each exchange (None: off)
    gaps: np.ndarray | None  # host gaps of each (op, layer, GPU) (None: off)
    share: np.ndarray  # [E, n] real-token share of each op's linear work


def draws(plan: StepPlan, schedule: Schedule, device: int, lin: LinearCosts, layout: Layout,
          noise: tuple[VarianceModel, np.random.Generator, int]) -> Draws:
    """The ops of ``device`` and their noise: per-GPU factors, then link jitter per exchange
    and host gaps per layer call (drawn only when on)."""
    variance, rng, step = noise
    order = schedule.orders[device]
    n, e_count, width = len(order), plan.pipelines, layout.pool * layout.cp
    mb = np.array([op.microbatch for op in order])
    layers = np.array([layout.layers_of(schedule, device, op.chunk) for op in order])
    lmax = int(layers.max())
    gpus = layout.stage_gpus(device, e_count)
    f = variance.factors(rng, gpus, n * lmax * 3, step).reshape(n, lmax, 3, e_count, width)
    xf = variance.exchange_factors(rng, gpus, width, n * lmax, step)
    gaps = variance.host_gaps(rng, n, lmax, gpus.size)
    # Per-slot real-token share of the linear work (WLB-LLM's variable-length microbatches).
    share = np.ones((e_count, n)) if lin.token_share is None else lin.token_share[:, mb]
    return Draws(np.array([op.kind == "F" for op in order]), mb, layers, f, xf, gaps, share)


def recomputed(att: SlotAttention, is_f: np.ndarray, mb: np.ndarray) -> np.ndarray:
    """[E, n, W] a full recomputation's forward compute before each backward (0 on
    forwards; an empty first axis without recomputation)."""
    if not att.recompute:
        return np.zeros((0, 1, 1))
    result: np.ndarray = att.compute_fwd[:, mb] * (~is_f).astype(float)[None, :, None]
    return result


def op_comm(att: SlotAttention, is_f: np.ndarray, mb: np.ndarray) -> np.ndarray:
    """[4, E, n] seconds per chunk of each op's dispatch, return, and a full recomputation's
    dispatch and return before a backward (0 on forwards and without recomputation)."""
    disp = np.where(is_f[None, :], att.dispatch_fwd[:, mb], att.dispatch_bwd[:, mb])
    ret = np.where(is_f[None, :], att.return_fwd[:, mb], att.return_bwd[:, mb])
    redo_d, redo_r = np.zeros_like(disp), np.zeros_like(ret)
    if att.recompute:
        assert att.recompute_dispatch is not None and att.recompute_return is not None
        is_b = (~is_f).astype(float)
        redo_d, redo_r = att.recompute_dispatch[:, mb] * is_b, att.recompute_return[:, mb] * is_b
    return np.stack([disp, ret, redo_d, redo_r])


def linear_parts(lin: LinearCosts, is_f: np.ndarray, share: np.ndarray) -> np.ndarray:
    """[4, E, n] per-layer seconds before attention, after it and of the expert all-to-all
    (the backward's moves the forward's bytes: dispatch and combine), and the token share."""
    pre = np.where(is_f, lin.pre_fwd, lin.pre_bwd)[None, :] * share
    post = np.where(is_f, lin.post_fwd, lin.post_bwd)[None, :] * share
    ep = np.where(is_f, lin.ep_comm_fwd, lin.ep_comm_bwd)[None, :] * share
    return np.stack([pre, post, ep, share])


def expert_parts(lin: LinearCosts, schedule: Schedule, device: int, layout: Layout,
                 is_f: np.ndarray, lmax: int) -> np.ndarray:
    """[2, n, L] routing skew per (op, local layer): the hottest EP rank's extra expert
    seconds at a token share of 1 (a backward's passes included) and the factor on the
    expert all-to-all (0 and 1: balanced routing)."""
    out = np.stack([np.zeros((is_f.size, lmax)), np.ones((is_f.size, lmax))])
    if lin.expert_extra is None or lin.ep_factor is None:
        return out
    g = global_layers(schedule, device, layout, lmax)
    passes = np.where(is_f, 1.0, lin.backward_passes)[:, None]
    out[0], out[1] = lin.expert_extra[g] * passes, lin.ep_factor[g]
    return out


def global_layers(schedule: Schedule, device: int, layout: Layout, lmax: int) -> np.ndarray:
    """[n, L] model-layer index of every (op, local layer) of ``device`` (clipped past the end)."""
    counts = [layout.layers_of(schedule, *schedule.device_of(v))
              for v in range(schedule.stages * schedule.virtual)]
    starts = np.concatenate([[0], np.cumsum(counts)])
    first = np.array([starts[schedule.virtual_stage(device, op)]
                      for op in schedule.orders[device]])
    return np.minimum(first[:, None] + np.arange(lmax), layout.layers - 1)
