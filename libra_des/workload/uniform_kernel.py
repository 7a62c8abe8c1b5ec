"""The routing generator's hot loops (numba): Plackett-Luce top-k draws and the latent states.

:func:`route_tokens` draws each token's ``k`` experts of one layer without replacement from
the softmax of its logits (``bias + latent @ gate``), one expert at a time: that is the law of
Gumbel-top-k (the order of the first ``k`` arrivals of exponential races with rates
``exp(logit)``), drawn from ``k`` uniforms per token instead of one Gumbel per expert. The
uniforms come from the run's seeded numpy Generator. :func:`ar1_mix` and
:func:`token_latents` are the AR(1) latent step and the token mix in one pass each.

Assumptions: ``exp`` is a float32 polynomial (Cody-Waite reduction, Cephes' ``expf``
coefficients, within about 2 ulp), so the draw probabilities match the softmax to about
1e-7 relative. Experts are grouped into ``BLOCKS`` strided blocks (expert ``c`` in block
``c % BLOCKS``) so a draw scans block sums, then one block. tests/test_routing_law.py tests
the law statistically; tests/test_uniform_kernel.py compares the draws bit for bit with
tests/reference/routing_draws.py, the same arithmetic one token at a time.

Why some steps are LLVM vector code (the ``@intrinsic`` functions below): a token's draws are
a chain of dependent steps (scan, pick, subtract), so the kernel's speed is that chain's
latency, and numba's loops over 16 prefixes came out as 16 scalar compares in a row. Each
intrinsic is 16 lanes of the same IEEE operations the scalar loop would do (compares, one
subtraction or sum per element in the loop's order, no fast-math, no fused multiply-add), so
every element is computed the same way whatever the vector width, and a seed gives the same
experts on every x86 build. Compiled functions are cached on disk (``cache=True``, see
``startup.numba_module``); the intrinsics live in this file because numba's cache notices
changes to a kernel's own file only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir

from libra_des.base.startup import numba_module

numba = numba_module()
types, cgutils = numba.types, numba.core.cgutils

#: Strided expert blocks of a draw's two-level scan (16 float32 fill one AVX-512 vector).
BLOCKS = 16
LOG2E = np.float32(1.44269504088896341)
LN2_HI = np.float32(0.693359375)
LN2_LO = np.float32(-2.12194440e-4)
#: Below this, exp underflows float32 (the weight is 0).
EXP_FLOOR = np.float32(-87.0)
EXP_COEFFS = (np.float32(1.9875691500e-4), np.float32(1.3981999507e-3),
              np.float32(8.3334519073e-3), np.float32(4.1665795894e-2),
              np.float32(1.6666665459e-1), np.float32(5.0000001201e-1))


@numba.njit(cache=True, nogil=True, inline="always")
def exp_shifted(logit: np.ndarray, top: np.float32, count: int, weight: np.ndarray,
                scale: np.ndarray) -> None:
    """``weight[c] = exp(logit[c] - top)`` for ``c < count`` (float32; 0 below ``EXP_FLOOR``);
    ``scale`` is int32 scratch of the same length (the bits of ``2**n``)."""
    p0, p1, p2, p3, p4, p5 = EXP_COEFFS
    one = np.float32(1.0)
    for c in range(count):
        x = max(logit[c] - top, EXP_FLOOR)
        n = np.floor(x * LOG2E + np.float32(0.5))
        r = (x - n * LN2_HI) - n * LN2_LO
        p = ((((p0 * r + p1) * r + p2) * r + p3) * r + p4) * r + p5
        weight[c] = (p * r) * r + r + one
        scale[c] = (np.int32(n) + np.int32(127)) << np.int32(23)
    factor = scale.view(np.float32)
    for c in range(count):
        weight[c] = weight[c] * factor[c] if logit[c] - top >= EXP_FLOOR else np.float32(0.0)


@numba.njit(cache=True, nogil=True, inline="always")
def lane_max(logit: np.ndarray, scratch: np.ndarray) -> np.float32:
    """The largest of ``logit`` (float32, no NaN), through the bits as integers ordered like the
    floats (an integer maximum vectorises; a float one without fast-math does not).
    ``scratch``: float32, at least one element."""
    bits = logit.view(np.int32)
    top = np.int32(-2147483648)
    for c in range(bits.size):
        i = bits[c]
        top = max(top, i ^ ((i >> np.int32(31)) & np.int32(0x7FFFFFFF)))
    scratch.view(np.int32)[0] = top ^ ((top >> np.int32(31)) & np.int32(0x7FFFFFFF))
    return scratch[0]


#: Per-token scratch of the kernel: the exponent bits (int32, one per expert), a float32 lane
#: and the block sums (float64, ``BLOCKS``).
Scratch = tuple[np.ndarray, np.ndarray, np.ndarray]


def c_array(ty: Any, dtype: Any) -> bool:
    """Whether numba type ``ty`` is a C-contiguous array of ``dtype`` (what the intrinsics
    read as flat memory)."""
    return isinstance(ty, types.Array) and ty.layout == "C" and ty.dtype == dtype


def vector_at(context: Any, builder: Any, arr_ty: Any, arr: Any, start: Any, lanes: int) -> Any:
    """A pointer to ``lanes`` elements of array ``arr`` from flat index ``start`` (intp)."""
    data = context.make_array(arr_ty)(context, builder, arr).data
    element = data.type.pointee
    return builder.bitcast(builder.gep(data, [start]), ir.VectorType(element, lanes).as_pointer())


def splat(builder: Any, x: Any, lanes: int) -> Any:
    """``x`` in every lane of a vector."""
    vec = ir.VectorType(x.type, lanes)
    one = builder.insert_element(ir.Constant(vec, ir.Undefined), x, ir.Constant(ir.IntType(32), 0))
    zeros = ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes)
    return builder.shuffle_vector(one, ir.Constant(vec, ir.Undefined), zeros)


def as_intp(context: Any, builder: Any, value: Any, ty: Any) -> Any:
    """An integer argument as numba's index type."""
    return context.cast(builder, value, ty, types.intp)


def index(context: Any, i: int) -> Any:
    """The constant index ``i`` (numba's index type)."""
    return ir.Constant(context.get_value_type(types.intp), i)


@numba.extending.intrinsic
def count_at_or_below(typingctx: Any, values: Any, x: Any) -> Any:
    """How many of the float64 ``values[:BLOCKS]`` are ``<= x``."""
    if not (c_array(values, types.float64) and x == types.float64):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        ptr = vector_at(context, builder, sig.args[0], args[0], index(context, 0), BLOCKS)
        below = builder.fcmp_ordered("<=", builder.load(ptr, align=8),
                                     splat(builder, args[1], BLOCKS))
        mask = builder.bitcast(below, ir.IntType(BLOCKS))
        popcount = builder.module.declare_intrinsic("llvm.ctpop", [ir.IntType(BLOCKS)])
        return builder.zext(builder.call(popcount, [mask]), context.get_value_type(types.intp))

    return types.intp(values, x), codegen


@numba.extending.intrinsic
def subtract_from(typingctx: Any, values: Any, first: Any, w: Any) -> Any:
    """``values[i] -= w`` for ``first <= i < BLOCKS`` (float64; the lanes before ``first``
    subtract 0.0, which leaves them as they are)."""
    if not (c_array(values, types.float64) and isinstance(first, types.Integer)
            and w == types.float64):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        ptr = vector_at(context, builder, sig.args[0], args[0], index(context, 0), BLOCKS)
        intp = context.get_value_type(types.intp)
        lane = ir.Constant(ir.VectorType(intp, BLOCKS), list(range(BLOCKS)))
        first = as_intp(context, builder, args[1], sig.args[1])
        hit = builder.icmp_signed(">=", lane, splat(builder, first, BLOCKS))
        zero = ir.Constant(ir.VectorType(ir.DoubleType(), BLOCKS), [0.0] * BLOCKS)
        take = builder.select(hit, splat(builder, args[2], BLOCKS), zero)
        builder.store(builder.fsub(builder.load(ptr, align=8), take), ptr, align=8)
        return context.get_dummy_value()

    return types.void(values, first, w), codegen


@numba.extending.intrinsic
def block_totals(typingctx: Any, weight: Any, rows: Any, out: Any) -> Any:
    """``out[b]`` = the float64 sum of block ``b``'s float32 weights ``weight[r * BLOCKS + b]``,
    ``r < rows``, added in row order from 0.0 (``out``: float64, ``BLOCKS`` long)."""
    if not (c_array(weight, types.float32) and isinstance(rows, types.Integer)
            and c_array(out, types.float64)):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        wide = ir.VectorType(ir.DoubleType(), BLOCKS)
        acc = cgutils.alloca_once_value(builder, ir.Constant(wide, [0.0] * BLOCKS))
        with cgutils.for_range(builder, as_intp(context, builder, args[1], sig.args[1])) as row:
            at = builder.mul(row.index, ir.Constant(row.index.type, BLOCKS))
            ptr = vector_at(context, builder, sig.args[0], args[0], at, BLOCKS)
            w = builder.fpext(builder.load(ptr, align=4), wide)
            builder.store(builder.fadd(builder.load(acc), w), acc)
        dst = vector_at(context, builder, sig.args[2], args[2], index(context, 0), BLOCKS)
        builder.store(builder.load(acc), dst, align=8)
        return context.get_dummy_value()

    return types.void(weight, rows, out), codegen


@numba.extending.intrinsic
def token_logits(typingctx: Any, latent: Any, t: Any, gate: Any, bias: Any, row: Any,
                 logit: Any) -> Any:
    """``logit = bias[row] + latent[t, 0] * gate[0] + latent[t, 1] * gate[1] + ..`` in float32,
    each term a product then a sum, in order (``gate`` [dim, width] and ``bias`` [rows, width]
    padded to ``width``, a multiple of ``BLOCKS``; the running sums stay in registers)."""
    arrays = (latent, gate, bias, logit)
    if not (all(c_array(a, types.float32) for a in arrays)
            and latent.ndim == gate.ndim == bias.ndim == 2 and logit.ndim == 1
            and isinstance(t, types.Integer) and isinstance(row, types.Integer)):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        lat = context.make_array(sig.args[0])(context, builder, args[0])
        dim = cgutils.unpack_tuple(builder, lat.shape, 2)[1]
        gate_arr = context.make_array(sig.args[2])(context, builder, args[2])
        width = cgutils.unpack_tuple(builder, gate_arr.shape, 2)[1]
        lanes = ir.Constant(width.type, BLOCKS)
        t_at = builder.mul(as_intp(context, builder, args[1], sig.args[1]), dim)
        row_at = builder.mul(as_intp(context, builder, args[4], sig.args[4]), width)
        with cgutils.for_range(builder, builder.udiv(width, lanes)) as chunk:
            c0 = builder.mul(chunk.index, lanes)
            at = builder.add(row_at, c0)
            start = vector_at(context, builder, sig.args[3], args[3], at, BLOCKS)
            acc = cgutils.alloca_once_value(builder, builder.load(start, align=4))
            with cgutils.for_range(builder, dim) as d:
                x = builder.load(builder.gep(lat.data, [builder.add(t_at, d.index)]))
                at = builder.add(builder.mul(d.index, width), c0)
                g = builder.load(vector_at(context, builder, sig.args[2], args[2], at, BLOCKS),
                                 align=4)
                term = builder.fmul(splat(builder, x, BLOCKS), g)
                builder.store(builder.fadd(builder.load(acc), term), acc)
            dst = vector_at(context, builder, sig.args[5], args[5], c0, BLOCKS)
            builder.store(builder.load(acc), dst, align=4)
        return context.get_dummy_value()

    return types.void(latent, t, gate, bias, row, logit), codegen


@numba.njit(cache=True, nogil=True)
def padded(gate: np.ndarray, bias: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``gate`` with zero columns and ``bias`` with -inf columns up to a whole number of
    blocks: the padding's logits are -inf, never drawn."""
    e = gate.shape[1]
    width = (e + BLOCKS - 1) // BLOCKS * BLOCKS
    gate_p = np.zeros((gate.shape[0], width), dtype=np.float32)
    gate_p[:, :e] = gate
    bias_p = np.full((bias.shape[0], width), np.float32(-np.inf), dtype=np.float32)
    bias_p[:, :e] = bias
    return gate_p, bias_p


@numba.njit(cache=True, nogil=True, inline="always")
def weigh(logit: np.ndarray, e: int, weight: np.ndarray, scratch: Scratch,
          prefix: np.ndarray) -> None:
    """A token's weights ``exp(logit - max)`` and their cumulative block sums ``prefix``."""
    scale, lanes, sums = scratch
    exp_shifted(logit, lane_max(logit, lanes), e, weight, scale)
    block_totals(weight, weight.size // BLOCKS, sums)
    run = sums[0]
    prefix[0] = run
    for b in range(1, BLOCKS):
        run = sums[b] + run
        prefix[b] = run


@numba.njit(cache=True, nogil=True)
def route_tokens(latent: np.ndarray, gate: np.ndarray, bias: np.ndarray, dataset: np.ndarray,
                 uniforms: np.ndarray, out: np.ndarray) -> None:
    """``out[t]`` = token ``t``'s ``k`` experts (``k = out.shape[1]``), drawn without
    replacement from ``softmax(bias[dataset[t]] + latent[t] @ gate)`` with the float64
    ``uniforms[t]``; the first draw (the largest Gumbel-perturbed score) goes in the last slot,
    so slots ascend by perturbed score. float32 ``latent`` [tokens, dim], ``gate`` [dim, e],
    ``bias`` [datasets, e], all C-contiguous."""
    e, k = gate.shape[1], out.shape[1]
    gate_p, bias_p = padded(gate, bias)
    width = gate_p.shape[1]
    gone = np.float32(-np.inf)
    logit = np.empty(width, dtype=np.float32)
    weight = np.zeros(width, dtype=np.float32)
    prefix = np.zeros(BLOCKS, dtype=np.float64)
    scratch = (np.empty(width, dtype=np.int32), np.empty(BLOCKS, dtype=np.float32),
               np.zeros(BLOCKS, dtype=np.float64))
    rows = width // BLOCKS
    for t in range(latent.shape[0]):
        token_logits(latent, t, gate_p, bias_p, dataset[t], logit)
        weigh(logit, e, weight, scratch, prefix)
        for j in range(k):
            # The pick, written out here rather than called: a jitted call taking arrays
            # would count references atomically on every draw. A second try follows a
            # rescale (rounding, or the rest underflowed against the first maximum).
            c = -1
            for attempt in range(2):
                if attempt:
                    weigh(logit, e, weight, scratch, prefix)
                total = prefix[BLOCKS - 1]
                if total > 0.0:
                    # The block: the count of block prefixes at or below the target; the
                    # expert: the count of that block's partial sums at or below the rest
                    # (counts, not early exits: no mispredicted branches).
                    target = uniforms[t, j] * total
                    b = count_at_or_below(prefix, target)
                    if b < BLOCKS:
                        rest = target - prefix[b - 1] if b else target
                        within, r = 0.0, 0
                        for i in range(rows):
                            within += weight[i * BLOCKS + b]
                            r += within <= rest
                        c = b + r * BLOCKS if r < rows else -1
                if c >= 0:
                    break
            if c < 0:  # the target sits in the last ulp: the last expert with weight
                c = last_positive(weight)
            out[t, k - 1 - j] = c
            # Subtracted, not re-summed: a residue left by rounding only sends a draw to
            # the rescale above.
            subtract_from(prefix, c % BLOCKS, np.float64(weight[c]))
            weight[c] = 0.0
            logit[c] = gone


@numba.njit(cache=True, nogil=True)
def last_positive(weight: np.ndarray) -> int:
    """The highest-numbered expert with weight (reached only through rounding)."""
    for c in range(weight.size - 1, -1, -1):
        if weight[c] > 0.0:
            return c
    return -1


@numba.njit(cache=True, nogil=True)
def ar1_mix(state: np.ndarray, noise: np.ndarray, scale: float, rho: np.float32) -> None:
    """``routing.ar1_update`` after its normal draw, in one pass over the flat float32 arrays:
    ``state = float32(float64(noise) * scale + float64(state * rho))`` with the state product
    in float32 and the sum in float64, each rounded as numpy's separate ufuncs round it."""
    for i in range(state.size):
        kept = state[i] * rho
        state[i] = np.float32(np.float64(noise[i]) * scale + np.float64(kept))


@numba.njit(cache=True, nogil=True)
def token_latents(
    req: np.ndarray, tok: np.ndarray, request: np.ndarray, w_req: np.float32,
    w_tok: np.float32, out: np.ndarray,
) -> None:
    """``routing.TokenLatents.mix``: ``w_req * req[request] + w_tok * tok`` in float32."""
    for t in range(tok.shape[0]):
        r = request[t]
        for d in range(tok.shape[1]):
            out[t, d] = w_req * req[r, d] + w_tok * tok[t, d]
