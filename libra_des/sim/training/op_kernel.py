"""One device's op durations for every pipeline entity (numba): :func:`stagetimes.
device_times`'s arithmetic per (entity, op, layer), its workers in one row.

Per layer of an op, each worker of the pool runs its attention as the Pipeliner schedules it
(:func:`~libra_des.plan.pipeline_kernel.makespan_row`), its compute chunks stretched beside
the exchange when overlap interferes (:func:`~libra_des.hardware.compute.interference_kernel.
stretch`), plus a full recomputation's forward before a backward; the layer waits for the
slowest worker in each of its three phases (before attention, attention, after it). The
per-layer fields are reduced over workers (maximum, mean) and layers (sum) in registers: the
array form made about 30 passes over ``[E, n, L, W]`` temporaries (tests/reference/
stagetimes.py holds it; tests/test_op_kernel.py compares the two).

Compiled functions are cached on disk (``cache=True``, in ``base.kernel``'s folder).
"""

from __future__ import annotations

import numpy as np

from libra_des.base.kernel import Floats, Ints, inline_kernel, kernel
from libra_des.hardware.compute.interference_kernel import stretch
from libra_des.plan.pipeline_kernel import makespan_row

#: Rows of :func:`op_times`' per-op output, in order.
PER_OP = ("duration", "attn_compute", "attn_exposed", "attn_hidden", "pool_wait",
          "other_comm", "interf_compute", "interf_comm", "linear", "linear_clean", "attn_wait")
#: Rows of its per-layer output, in order.
PER_LAYER = ("straggler", "pre", "compute_max", "post")


@kernel
def op_times(
    comp: Floats,
    comp_r: Floats,
    comm: Floats,
    noise: Floats,
    links: Floats,
    gaps: Floats,
    linear: Floats,
    expert: Floats,
    layers: Ints,
    m: int,
    factors: Floats,
) -> tuple[Floats, Floats]:
    """Per-op fields ``[11, E, n]`` (:data:`PER_OP`) and per-layer ones ``[4, E, n, L]``
    (:data:`PER_LAYER`) of one device.

    ``comp``: ``[E, n, W]`` attention compute of each op (all chunks); ``comp_r``: a full
    recomputation's forward compute before each backward (``[E, n, W]``, 0 on forwards; an
    empty first axis without recomputation). ``comm``: ``[4, E, n]`` seconds per chunk of
    dispatch, return, recomputed dispatch and recomputed return. ``noise``: ``[n, L, 3, E, W]``
    factors (before attention, attention compute, after it). ``links``: ``[n, L, E]`` factor
    on each exchange, ``gaps``: ``[n, L, E, W]`` host gaps (empty first axis: off).
    ``linear``: ``[4, E, n]`` seconds per layer before attention, after it and of the expert
    all-to-all, and the op's real-token share; ``expert``: ``[2, n, L]`` the hottest EP
    rank's extra seconds at a token share of 1 and the factor on the all-to-all.
    ``factors``: (kernel, collective) slowdown while compute runs beside the exchange,
    empty when overlap is free.
    """
    e_count, n, width = comp.shape
    lmax = noise.shape[1]
    recompute, overlap = comp_r.shape[0] > 0, factors.shape[0] > 0
    kernel = factors[0] if overlap else 1.0
    slow = factors[1] if overlap else 1.0
    per_op = np.zeros((11, e_count, n))
    per_layer = np.zeros((4, e_count, n, lmax))
    chunk, comp_l, t_w, scratch = (np.empty(width), np.empty(width), np.empty(width),
                                   np.empty((3, width)))
    slowed, lost, t_r, chunk_r = (np.empty(width), np.empty(width), np.empty(width),
                                  np.empty(width))
    beside_share = (m - 1) / m
    slowed[:], lost[:] = 0.0, 0.0  # stay 0 when overlap is free
    # Entities innermost: the noise of one (op, layer) is contiguous over (entity, worker).
    for i in range(n):
        for lay in range(layers[i]):
            for e in range(e_count):
                disp, ret = comm[0, e, i], comm[1, e, i]
                disp_r = comm[2, e, i] if recompute else 0.0
                ret_r = comm[3, e, i] if recompute else 0.0
                d = disp * links[i, lay, e] if links.shape[0] > 0 else disp
                r = ret * links[i, lay, e] if links.shape[0] > 0 else ret
                row, factor = comp[e, i], noise[i, lay, 1, e]
                for w in range(width):  # no branch: a vector loop
                    comp_l[w] = row[w] * factor[w]
                    chunk[w] = comp_l[w] / m
                if overlap:
                    beside = (d + r) * beside_share
                    for w in range(width):
                        added, extra = stretch(chunk[w], beside, kernel, slow)
                        chunk[w] = chunk[w] + added
                        slowed[w], lost[w] = added * m, extra * m
                        comp_l[w] = chunk[w] * m
                makespan_row(chunk, d, r, m, t_w, scratch[0], scratch[1], scratch[2])
                total = (d + r) * m
                if recompute:
                    for w in range(width):
                        cr = comp_r[e, i, w] * noise[i, lay, 1, e, w]
                        if overlap:
                            cr = cr / m
                            added, _ = stretch(cr, (disp_r + ret_r) * beside_share, kernel,
                                               slow)
                            slowed[w] += added * m
                            cr = (cr + added) * m
                        chunk_r[w] = cr / m
                        comp_l[w] += cr
                    makespan_row(chunk_r, disp_r, ret_r, m, t_r, scratch[0], scratch[1],
                                 scratch[2])
                    total += (disp_r + ret_r) * m
                    for w in range(width):
                        t_w[w] += t_r[w]
                layer_fields(e, i, lay, comp_l, t_w, slowed, lost, total, noise, gaps,
                             linear, expert, per_op, per_layer)
    return per_op, per_layer


@inline_kernel
def layer_fields(e: int, i: int, lay: int, comp_l: Floats, t_w: Floats, slowed: Floats,
                 lost: Floats, total: float, noise: Floats, gaps: Floats,
                 linear: Floats, expert: Floats, per_op: Floats,
                 per_layer: Floats) -> None:
    """One layer's phases (each the slowest worker's) added into the op's fields."""
    width = comp_l.shape[0]
    share_pre, share_post = linear[0, e, i], linear[1, e, i]
    post_l = share_post + expert[0, i, lay] * linear[3, e, i]
    ep = linear[2, e, i] * expert[1, i, lay]
    attn, pre, post, cmax = -np.inf, -np.inf, -np.inf, -np.inf
    for w in range(width):
        pre_w = share_pre * noise[i, lay, 0, e, w]
        if gaps.shape[0] > 0:
            pre_w += gaps[i, lay, e, w]
        pre = max(pre, pre_w)
        post = max(post, post_l * noise[i, lay, 2, e, w])
        attn = max(attn, t_w[w])
        cmax = max(cmax, comp_l[w])
    s_comp, s_exposed, s_hidden, s_wait, s_slowed, s_lost = 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    s_lin, s_attn_wait = 0.0, 0.0
    for w in range(width):
        pre_w = share_pre * noise[i, lay, 0, e, w]
        if gaps.shape[0] > 0:
            pre_w += gaps[i, lay, e, w]
        s_lin += pre_w + post_l * noise[i, lay, 2, e, w]
        s_attn_wait += attn - t_w[w]
        exposed = t_w[w] - comp_l[w]
        s_comp += comp_l[w]
        s_exposed += exposed
        s_hidden += max(total - exposed, 0.0)
        s_wait += (pre - pre_w) + (attn - t_w[w]) + (post - post_l * noise[i, lay, 2, e, w])
        s_slowed += slowed[w]
        s_lost += lost[w]
    per_op[0, e, i] += pre + attn + post + ep
    per_op[1, e, i] += s_comp / width
    per_op[2, e, i] += s_exposed / width
    per_op[3, e, i] += s_hidden / width
    per_op[4, e, i] += s_wait / width
    per_op[5, e, i] += ep
    per_op[6, e, i] += s_slowed / width
    per_op[7, e, i] += s_lost / width
    # The attribution's parts (results/attribution.py): the linear phases as run and without
    # noise, and the attention phase's share of the lockstep wait.
    per_op[8, e, i] += s_lin / width
    per_op[9, e, i] += share_pre + post_l
    per_op[10, e, i] += s_attn_wait / width
    per_layer[0, e, i, lay] = attn
    per_layer[1, e, i, lay] = pre
    per_layer[2, e, i, lay] = cmax
    per_layer[3, e, i, lay] = post + ep
