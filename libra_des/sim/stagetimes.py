"""Per-op durations of every pipeline device, computed in one vectorised pass per device.

For device ``d`` the arrays have shape ``[E, n_ops]`` (pipelines x ops in the device's order).
Noise is drawn per worker, per layer and per part (pre-attention, attention, post-attention)
from the variance model, so a pool's op lasts as long as its slowest worker in every layer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from libra_des.hardware.variance import VarianceModel
from libra_des.plan.step import StepPlan
from libra_des.plan.tap import pipelined_time
from libra_des.sim.opcost import LinearCosts, SlotAttention
from libra_des.sim.schedules import Schedule


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
    # Per-layer lockstep parts, kept for the detailed mode which replays them as events:
    pre: np.ndarray  # [E, n, L] slowest worker's pre-attention work
    compute_max: np.ndarray  # [E, n, L] slowest worker's attention compute (all chunks)
    post: np.ndarray  # [E, n, L] slowest worker's post-attention work incl. expert all-to-all


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


#: Pipeline entities costed together: bounds the [E, n, L, W] temporaries, which set the
#: step's memory peak at scale (all 256 entities of 131k GPUs at once need about 250 MiB of
#: them). Entities are independent, so the result does not depend on it (our choice).
ENTITY_BLOCK = 64


def device_times(
    plan: StepPlan,
    schedule: Schedule,
    device: int,
    lin: LinearCosts,
    att: SlotAttention,
    layout: Layout,
    noise: tuple[VarianceModel, np.random.Generator, int],
) -> DeviceTimes:
    """Durations of all ops of ``device`` for every pipeline entity."""
    variance, rng, step = noise
    order = schedule.orders[device]
    n = len(order)
    e_count = plan.pipelines
    width = layout.pool * layout.cp
    is_f = np.array([op.kind == "F" for op in order])
    mb = np.array([op.microbatch for op in order])
    layers = np.array([layout.layers_of(schedule, device, op.chunk) for op in order])
    lmax = int(layers.max())
    gpus = layout.stage_gpus(device, e_count)
    f = variance.factors(rng, gpus, n * lmax * 3, step)
    f = f.reshape(n, lmax, 3, e_count, width).transpose(3, 0, 1, 2, 4)
    mask = (np.arange(lmax)[None, :] < layers[:, None]).astype(float)  # [n, L]
    # The backward's expert all-to-all moves the same bytes as the forward's (dispatch+combine).
    ep = np.full((1, n, 1), lin.ep_comm_fwd)

    def entities(lo: int, hi: int) -> dict[str, np.ndarray]:
        """The [E, ...] fields of entities ``lo .. hi-1``."""
        fb = f[lo:hi]
        comp = np.where(is_f[None, :, None], att.compute_fwd[lo:hi, mb],
                        att.compute_bwd[lo:hi, mb])
        disp = np.where(is_f[None, :], att.dispatch_fwd[lo:hi, mb], att.dispatch_bwd[lo:hi, mb])
        ret = np.where(is_f[None, :], att.return_fwd[lo:hi, mb], att.return_bwd[lo:hi, mb])
        comp_l = comp[:, :, None, :] * fb[:, :, :, 1, :]  # [E, n, L, W]
        m = att.chunks
        t_w = np.asarray(
            pipelined_time(comp_l / m, disp[:, :, None, None], ret[:, :, None, None], m)
        )
        attn = t_w.max(axis=-1)  # [E, n, L]

        pre_base = np.where(is_f, lin.pre_fwd, lin.pre_bwd)[None, :, None, None]
        post_base = np.where(is_f, lin.post_fwd, lin.post_bwd)[None, :, None, None]
        pre_w = pre_base * fb[:, :, :, 0, :]
        post_w = post_base * fb[:, :, :, 2, :]
        pre, post = pre_w.max(axis=-1), post_w.max(axis=-1)

        per_layer = (pre + attn + post + ep) * mask
        exposed_w = t_w - comp_l
        comm_total = (disp + ret)[:, :, None, None] * m
        wait = (pre[..., None] - pre_w) + (attn[..., None] - t_w) + (post[..., None] - post_w)
        return {
            "duration": per_layer.sum(axis=-1),
            "attn_compute": (comp_l.mean(axis=-1) * mask).sum(axis=-1),
            "attn_exposed": (exposed_w.mean(axis=-1) * mask).sum(axis=-1),
            "attn_hidden": (np.maximum(comm_total - exposed_w, 0.0).mean(axis=-1) * mask).sum(-1),
            "pool_wait": (wait.mean(axis=-1) * mask).sum(axis=-1),
            "straggler": attn * mask,
            "pair_heads": att.pair_heads[lo:hi, mb] * layers[None, :],
            "pre": pre * mask,
            "compute_max": comp_l.max(axis=-1) * mask,
            "post": (post + ep) * mask,
        }

    parts = [entities(lo, min(lo + ENTITY_BLOCK, e_count))
             for lo in range(0, e_count, ENTITY_BLOCK)]
    return DeviceTimes(
        **{key: np.concatenate([part[key] for part in parts]) for key in parts[0]},
        other_comm=(ep * mask).sum(axis=-1),
        layers=layers,
    )
