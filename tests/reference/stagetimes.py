"""One device's op durations in plain numpy (``libra_des.sim.training.stagetimes`` runs
``op_kernel``; tests/test_op_kernel.py compares them): every field as an array over
``[E, n, L, W]`` (entities, ops, layers, workers), in blocks of entities.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from libra_des.hardware.variance.model import VarianceModel
from libra_des.plan.step import StepPlan
from libra_des.plan.tap import pipelined_time
from libra_des.sim.training.opcost import LinearCosts, SlotAttention
from libra_des.sim.training.overlap import Factors, pipeliner_stretch
from libra_des.sim.training.schedules import Schedule
from libra_des.sim.training.stagetimes import DeviceTimes, Layout, draws, global_layers

#: Pipeline entities costed together: bounds the [E, n, L, W] temporaries, which set the
#: step's memory peak at scale (all 256 entities of 131k GPUs at once need about 250 MiB of
#: them). Entities are independent, so the result does not depend on it. Small blocks keep
#: the temporaries in cache and in the allocator's heap (measured on ``scale-16384``: 8 a
#: block about half the time of 64; benchmarks/README.md, "The closing round").
ENTITY_BLOCK = 8


def device_times_numpy(plan: StepPlan, schedule: Schedule, device: int, lin: LinearCosts,
                       att: SlotAttention, layout: Layout,
                       noise: tuple[VarianceModel, np.random.Generator, int],
                       overlap: Factors | None = None) -> DeviceTimes:
    """``stagetimes.device_times`` as arrays over ``[E, n, L, W]``, in entity blocks."""
    d = draws(plan, schedule, device, lin, layout, noise)
    is_f, mb, layers, xf, gaps, share_all = d.is_f, d.mb, d.layers, d.links, d.gaps, d.share
    n, lmax, e_count, width = is_f.size, d.noise.shape[1], plan.pipelines, d.noise.shape[4]
    f = d.noise.transpose(3, 0, 1, 2, 4)
    extra = (None if xf is None else xf.reshape(n, lmax, e_count).transpose(2, 0, 1),
             None if gaps is None else gaps.reshape(n, lmax, e_count, width).transpose(2, 0, 1, 3))
    mask = (np.arange(lmax)[None, :] < layers[:, None]).astype(float)  # [n, L]
    g = global_layers(schedule, device, layout, lmax) if lin.expert_extra is not None else None
    ctx = OpContext(is_f, mb, mask, layers, lmax, extra, overlap)

    parts = [entity_block(slice(lo, min(lo + ENTITY_BLOCK, e_count)), f, share_all, att, lin,
                          ctx, g)
             for lo in range(0, e_count, ENTITY_BLOCK)]
    return DeviceTimes(
        **{key: np.concatenate([part[key] for part in parts]) for key in parts[0]},
        layers=layers,
    )


@dataclass(frozen=True)
class OpContext:
    """What every entity block of one device shares: op kinds, microbatches, layer mask."""

    is_f: np.ndarray  # [n] forward ops
    mb: np.ndarray  # [n] microbatch of each op
    mask: np.ndarray  # [n, L] 1 where the op covers that local layer
    layers: np.ndarray  # [n] layers each op covers
    lmax: int
    # [E, n, L] link factor of each exchange and [E, n, L, W] host gaps, None when off.
    extra: tuple[np.ndarray | None, np.ndarray | None] = (None, None)
    overlap: Factors | None = None


def entity_block(
    sl: slice,
    f: np.ndarray,
    share_all: np.ndarray,
    att: SlotAttention,
    lin: LinearCosts,
    ctx: OpContext,
    g: np.ndarray | None,
) -> dict[str, np.ndarray]:
    """The [E, ...] fields of the entities in ``sl`` (entities are independent)."""
    is_f, mb, mask = ctx.is_f, ctx.mb, ctx.mask
    fb, share = f[sl], share_all[sl]
    comp = np.where(is_f[None, :, None], att.compute_fwd[sl, mb], att.compute_bwd[sl, mb])
    disp = np.where(is_f[None, :], att.dispatch_fwd[sl, mb], att.dispatch_bwd[sl, mb])
    ret = np.where(is_f[None, :], att.return_fwd[sl, mb], att.return_bwd[sl, mb])
    comp_l = comp[:, :, None, :] * fb[:, :, :, 1, :]  # [E, n, L, W]
    m = att.chunks
    disp_l, ret_l = disp[:, :, None, None], ret[:, :, None, None]
    links, gaps = ctx.extra
    if links is not None:
        disp_l, ret_l = disp_l * links[sl][..., None], ret_l * links[sl][..., None]
    chunk, lost, slowed = comp_l / m, None, None
    if ctx.overlap is not None:
        slowed, lost = pipeliner_stretch(chunk, disp_l, ret_l, m, ctx.overlap)
        chunk = chunk + slowed
        slowed *= m
        lost *= m
        comp_l = chunk * m
    t_w = np.asarray(pipelined_time(chunk, disp_l, ret_l, m))
    comm_total = (disp_l + ret_l) * m
    if att.recompute:
        comp_l, t_w, comm_total, slowed_r = with_recompute(
            att, sl, is_f, mb, fb, (comp_l, t_w, comm_total), ctx.overlap)
        if slowed is not None and slowed_r is not None:
            slowed = slowed + slowed_r
    attn = t_w.max(axis=-1)  # [E, n, L]

    pre_base = np.where(is_f, lin.pre_fwd, lin.pre_bwd)[None, :] * share
    post_base = np.where(is_f, lin.post_fwd, lin.post_bwd)[None, :] * share
    post_l = post_base[:, :, None] * np.ones(ctx.lmax)  # [E, n, L]
    # The backward's expert all-to-all moves the same bytes as the forward's (dispatch+combine).
    ep = (np.where(is_f, lin.ep_comm_fwd, lin.ep_comm_bwd)[None, :] * share)[:, :, None]
    if g is not None and lin.expert_extra is not None and lin.ep_factor is not None:
        # Routing skew: the hottest EP rank's extra expert work and all-to-all, per layer.
        passes = np.where(is_f, 1.0, lin.backward_passes)[:, None]
        post_l = post_l + lin.expert_extra[g] * passes * share[:, :, None]
        ep = ep * lin.ep_factor[g]
    pre_w = pre_base[:, :, None, None] * fb[:, :, :, 0, :]
    if gaps is not None:
        pre_w = pre_w + gaps[sl]  # the host is late: the GPU idles before the layer's kernels
    post_w = post_l[..., None] * fb[:, :, :, 2, :]
    pre, post = pre_w.max(axis=-1), post_w.max(axis=-1)

    per_layer = (pre + attn + post + ep) * mask
    interf = np.zeros(comp.shape[:2]), np.zeros(comp.shape[:2])
    if slowed is not None and lost is not None:
        interf = ((slowed.mean(axis=-1) * mask).sum(axis=-1),
                  (lost.mean(axis=-1) * mask).sum(axis=-1))
    exposed_w = t_w - comp_l
    wait = (pre[..., None] - pre_w) + (attn[..., None] - t_w) + (post[..., None] - post_w)
    clean = comp.mean(axis=-1)
    if att.recompute:
        clean = clean + (att.compute_fwd[sl, mb] * (~is_f)[None, :, None]).mean(axis=-1)
    return {
        "duration": per_layer.sum(axis=-1),
        "attn_compute": (comp_l.mean(axis=-1) * mask).sum(axis=-1),
        "attn_exposed": (exposed_w.mean(axis=-1) * mask).sum(axis=-1),
        "attn_hidden": (np.maximum(comm_total - exposed_w, 0.0).mean(axis=-1) * mask).sum(-1),
        "pool_wait": (wait.mean(axis=-1) * mask).sum(axis=-1),
        "other_comm": (ep * mask).sum(axis=-1),
        "straggler": attn * mask,
        "pair_heads": att.pair_heads[sl, mb] * ctx.layers[None, :],
        "linear_share": share * ctx.layers[None, :],
        "pre": pre * mask,
        "compute_max": comp_l.max(axis=-1) * mask,
        "post": (post + ep) * mask,
        "interf_compute": interf[0],
        "interf_comm": interf[1],
        "linear": ((pre_w + post_w).mean(axis=-1) * mask).sum(axis=-1),
        "linear_clean": ((pre_base[:, :, None] + post_l) * mask).sum(axis=-1),
        "attn_wait": ((attn[..., None] - t_w).mean(axis=-1) * mask).sum(axis=-1),
        "attn_clean": clean * ctx.layers[None, :],
    }


def with_recompute(
    att: SlotAttention,
    sl: slice,
    is_f: np.ndarray,
    mb: np.ndarray,
    f: np.ndarray,
    parts: tuple[np.ndarray, np.ndarray, np.ndarray],
    overlap: Factors | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Add a full recomputation's forward attention (and its exchange) to every backward op.

    The recomputed forward runs its own Pipeliner schedule before the backward's, with the
    same per-worker noise draw as the backward's attention of that layer.
    """
    comp_l, t_w, comm_total = parts
    assert att.recompute_dispatch is not None and att.recompute_return is not None
    m = att.chunks
    is_b = (~is_f).astype(float)
    comp_r = att.compute_fwd[sl, mb][:, :, None, :] * f[:, :, :, 1, :] * is_b[None, :, None, None]
    disp = att.recompute_dispatch[sl, mb] * is_b
    ret = att.recompute_return[sl, mb] * is_b
    slowed = None
    if overlap is not None:
        chunk = comp_r / m
        slowed = pipeliner_stretch(chunk, disp[:, :, None, None], ret[:, :, None, None], m,
                                   overlap)[0]
        comp_r = (chunk + slowed) * m
        slowed *= m
    t_r = np.asarray(pipelined_time(comp_r / m, disp[:, :, None, None], ret[:, :, None, None], m))
    return comp_l + comp_r, t_w + t_r, comm_total + (disp + ret)[:, :, None, None] * m, slowed
