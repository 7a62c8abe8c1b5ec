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

Why tokens are drawn in pairs (``GROUP``): a token's ``k`` draws are one chain of
dependent steps, so two tokens' ``j``-th draws in turn let the CPU overlap two chains (about
365 to 265 ns a token-layer for 128 experts and ``k = 8``, benchmarks/README.md); each token's
arithmetic is unchanged.

Why some steps are LLVM vector code (the ``@intrinsic`` functions below): a token's draws are
a chain of dependent steps (scan, pick, subtract), so the kernel's speed is that chain's
latency, and numba's loops over 16 prefixes came out as 16 scalar compares in a row. Each
intrinsic is 16 lanes of the same IEEE operations the scalar loop would do (compares, one
subtraction or sum per element in the loop's order, no fast-math, no fused multiply-add), so
every element is computed the same way whatever the vector width, and a seed gives the same
experts on every x86 build. Compiled functions are cached on disk (``cache=True``, see
``base.kernel``); the intrinsics live in this file because numba's cache notices
changes to a kernel's own file only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types

from libra_des.base.kernel import Float32s, Floats, Int16s, Int32s, inline_kernel, intrinsic, kernel

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


def row_at(context: Any, builder: Any, arr_ty: Any, arr: Any, row: Any, row_ty: Any) -> Any:
    """The flat index of row ``row`` (an integer argument of type ``row_ty``) of 2-D C
    array ``arr``."""
    shape = context.make_array(arr_ty)(context, builder, arr).shape
    width = cgutils.unpack_tuple(builder, shape, 2)[1]
    return builder.mul(as_intp(context, builder, row, row_ty), width)


def row_array(ty: Any, dtype: Any) -> bool:
    """Whether ``ty`` is a 2-D C-contiguous array of ``dtype`` (rows read as flat memory)."""
    return c_array(ty, dtype) and ty.ndim == 2


@intrinsic
def count_at_or_below(typingctx: Any, values: Any, g: Any, x: Any) -> Any:
    """How many of the float64 ``values[g, :BLOCKS]`` are ``<= x``."""
    if not (row_array(values, types.float64) and isinstance(g, types.Integer)
            and x == types.float64):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        at = row_at(context, builder, sig.args[0], args[0], args[1], sig.args[1])
        ptr = vector_at(context, builder, sig.args[0], args[0], at, BLOCKS)
        below = builder.fcmp_ordered("<=", builder.load(ptr, align=8),
                                     splat(builder, args[2], BLOCKS))
        mask = builder.bitcast(below, ir.IntType(BLOCKS))
        popcount = builder.module.declare_intrinsic("llvm.ctpop", [ir.IntType(BLOCKS)])
        return builder.zext(builder.call(popcount, [mask]), context.get_value_type(types.intp))

    return types.intp(values, g, x), codegen


@intrinsic
def subtract_from(typingctx: Any, values: Any, g: Any, first: Any, w: Any) -> Any:
    """``values[g, i] -= w`` for ``first <= i < BLOCKS`` (float64; the lanes before ``first``
    subtract 0.0, which leaves them as they are)."""
    if not (row_array(values, types.float64) and isinstance(g, types.Integer)
            and isinstance(first, types.Integer) and w == types.float64):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        at = row_at(context, builder, sig.args[0], args[0], args[1], sig.args[1])
        ptr = vector_at(context, builder, sig.args[0], args[0], at, BLOCKS)
        intp = context.get_value_type(types.intp)
        lane = ir.Constant(ir.VectorType(intp, BLOCKS), list(range(BLOCKS)))
        first = as_intp(context, builder, args[2], sig.args[2])
        hit = builder.icmp_signed(">=", lane, splat(builder, first, BLOCKS))
        zero = ir.Constant(ir.VectorType(ir.DoubleType(), BLOCKS), [0.0] * BLOCKS)
        take = builder.select(hit, splat(builder, args[3], BLOCKS), zero)
        builder.store(builder.fsub(builder.load(ptr, align=8), take), ptr, align=8)
        return context.get_dummy_value()

    return types.void(values, g, first, w), codegen


def vector_constant(ty: Any, x: float | int) -> Any:
    """``x`` in every lane of a ``BLOCKS``-lane vector of element type ``ty``."""
    return ir.Constant(ir.VectorType(ty, BLOCKS), [x] * BLOCKS)


def ordered_key(builder: Any, bits: Any, mask: Any, shift: Any) -> Any:
    """float32 bits as int32 ordered like the floats (no NaN); the map is its own inverse
    (an integer maximum vectorises, a float one without fast-math does not)."""
    return builder.xor(bits, builder.and_(builder.ashr(bits, shift), mask))


def row_max(builder: Any, at: Any, chunks: Any, lanes: Any, load: Any) -> Any:
    """The float32 maximum of a row's ``chunks`` vectors (``load(at)`` reads one as int32)."""
    i32 = ir.IntType(32)
    mask, shift = vector_constant(i32, 0x7FFFFFFF), vector_constant(i32, 31)
    best = cgutils.alloca_once_value(builder, vector_constant(i32, -(2**31)))
    with cgutils.for_range(builder, chunks) as chunk:
        key = ordered_key(builder, load(builder.add(at, builder.mul(chunk.index, lanes))),
                          mask, shift)
        old = builder.load(best)
        builder.store(builder.select(builder.icmp_signed(">", key, old), key, old), best)
    v, undef = builder.load(best), ir.Constant(ir.VectorType(i32, BLOCKS), ir.Undefined)
    step = BLOCKS // 2
    while step:  # a shuffle tree: lane 0 ends with the largest key
        moved = builder.shuffle_vector(v, undef, ir.Constant(
            ir.VectorType(i32, BLOCKS), [(i + step) % BLOCKS for i in range(BLOCKS)]))
        v = builder.select(builder.icmp_signed(">", moved, v), moved, v)
        step //= 2
    top = ordered_key(builder, v, mask, shift)
    return builder.bitcast(builder.extract_element(top, ir.Constant(i32, 0)), ir.FloatType())


def exp_vector(builder: Any, shifted: Any) -> Any:
    """``exp(shifted)`` lane by lane, the float32 Cody-Waite polynomial (0 below
    ``EXP_FLOOR``): each step one IEEE product or sum, no fused multiply-add."""
    f32, i32 = ir.FloatType(), ir.IntType(32)

    def const(x: Any) -> Any:
        return vector_constant(f32, float(x))

    floor_ = const(EXP_FLOOR)
    x = builder.select(builder.fcmp_ordered("<", shifted, floor_), floor_, shifted)
    vec = ir.VectorType(f32, BLOCKS)
    rounder = builder.module.declare_intrinsic(f"llvm.floor.v{BLOCKS}f32",
                                               fnty=ir.FunctionType(vec, [vec]))
    n = builder.call(rounder, [builder.fadd(builder.fmul(x, const(LOG2E)), const(0.5))])
    r = builder.fsub(builder.fsub(x, builder.fmul(n, const(LN2_HI))),
                     builder.fmul(n, const(LN2_LO)))
    p = const(EXP_COEFFS[0])
    for coeff in EXP_COEFFS[1:]:
        p = builder.fadd(builder.fmul(p, r), const(coeff))
    w = builder.fadd(builder.fadd(builder.fmul(builder.fmul(p, r), r), r), const(1.0))
    bits = builder.shl(builder.add(builder.fptosi(n, ir.VectorType(i32, BLOCKS)),
                                   vector_constant(i32, 127)), vector_constant(i32, 23))
    w = builder.fmul(w, builder.bitcast(bits, ir.VectorType(f32, BLOCKS)))
    return builder.select(builder.fcmp_ordered(">=", shifted, floor_), w, const(0.0))


@intrinsic
def weigh_row(typingctx: Any, logit: Any, g: Any, weight: Any, sums: Any) -> Any:
    """``weight[g] = exp(logit[g] - max(logit[g]))`` (``exp_vector``; the max over finite or
    -inf logits) and ``sums[g, b]`` = the float64 sum of block ``b``'s weights
    ``weight[g, r * BLOCKS + b]``, added in row order from 0.0 (``logit`` and ``weight``
    float32 of one width, a multiple of ``BLOCKS``; ``sums`` float64, ``BLOCKS`` wide)."""
    if not (row_array(logit, types.float32) and isinstance(g, types.Integer)
            and row_array(weight, types.float32) and row_array(sums, types.float64)):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        f32, i32 = ir.FloatType(), ir.IntType(32)
        start = row_at(context, builder, sig.args[0], args[0], args[1], sig.args[1])
        shape = context.make_array(sig.args[0])(context, builder, args[0]).shape
        width = cgutils.unpack_tuple(builder, shape, 2)[1]
        lanes = ir.Constant(width.type, BLOCKS)
        chunks = builder.udiv(width, lanes)

        def logits_at(at: Any, ty: Any = f32) -> Any:
            ptr = vector_at(context, builder, sig.args[0], args[0], at, BLOCKS)
            return builder.load(builder.bitcast(ptr, ir.VectorType(ty, BLOCKS).as_pointer()),
                                align=4)

        top = splat(builder, row_max(builder, start, chunks, lanes,
                                     lambda at: logits_at(at, i32)), BLOCKS)
        wide = ir.VectorType(ir.DoubleType(), BLOCKS)
        acc = cgutils.alloca_once_value(builder, ir.Constant(wide, [0.0] * BLOCKS))
        with cgutils.for_range(builder, chunks) as chunk:
            at = builder.add(start, builder.mul(chunk.index, lanes))
            w = exp_vector(builder, builder.fsub(logits_at(at), top))
            builder.store(w, vector_at(context, builder, sig.args[2], args[2], at, BLOCKS),
                          align=4)
            builder.store(builder.fadd(builder.load(acc), builder.fpext(w, wide)), acc)
        out_at = row_at(context, builder, sig.args[3], args[3], args[1], sig.args[1])
        dst = vector_at(context, builder, sig.args[3], args[3], out_at, BLOCKS)
        builder.store(builder.load(acc), dst, align=8)
        return context.get_dummy_value()

    return types.void(logit, g, weight, sums), codegen


@intrinsic
def token_logits(typingctx: Any, latent: Any, t: Any, gate: Any, bias: Any, row: Any,
                 logit: Any, g: Any) -> Any:
    """``logit[g] = bias[row] + latent[t, 0] * gate[0] + latent[t, 1] * gate[1] + ..`` in float32,
    each term a product then a sum, in order (``gate`` [dim, width] and ``bias`` [rows, width]
    padded to ``width``, a multiple of ``BLOCKS``; the running sums stay in registers)."""
    arrays = (latent, gate, bias, logit)
    if not (all(c_array(a, types.float32) for a in arrays)
            and latent.ndim == gate.ndim == bias.ndim == logit.ndim == 2
            and isinstance(t, types.Integer) and isinstance(row, types.Integer)
            and isinstance(g, types.Integer)):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        lat = context.make_array(sig.args[0])(context, builder, args[0])
        dim = cgutils.unpack_tuple(builder, lat.shape, 2)[1]
        gate_arr = context.make_array(sig.args[2])(context, builder, args[2])
        width = cgutils.unpack_tuple(builder, gate_arr.shape, 2)[1]
        lanes = ir.Constant(width.type, BLOCKS)
        t_at = builder.mul(as_intp(context, builder, args[1], sig.args[1]), dim)
        bias_at = builder.mul(as_intp(context, builder, args[4], sig.args[4]), width)
        out_at = row_at(context, builder, sig.args[5], args[5], args[6], sig.args[6])
        with cgutils.for_range(builder, builder.udiv(width, lanes)) as chunk:
            c0 = builder.mul(chunk.index, lanes)
            at = builder.add(bias_at, c0)
            start = vector_at(context, builder, sig.args[3], args[3], at, BLOCKS)
            acc = cgutils.alloca_once_value(builder, builder.load(start, align=4))
            with cgutils.for_range(builder, dim) as d:
                x = builder.load(builder.gep(lat.data, [builder.add(t_at, d.index)]))
                at = builder.add(builder.mul(d.index, width), c0)
                g = builder.load(vector_at(context, builder, sig.args[2], args[2], at, BLOCKS),
                                 align=4)
                term = builder.fmul(splat(builder, x, BLOCKS), g)
                builder.store(builder.fadd(builder.load(acc), term), acc)
            dst = vector_at(context, builder, sig.args[5], args[5], builder.add(out_at, c0),
                            BLOCKS)
            builder.store(builder.load(acc), dst, align=4)
        return context.get_dummy_value()

    return types.void(latent, t, gate, bias, row, logit, g), codegen


@kernel
def padded(gate: Float32s, bias: Float32s) -> tuple[np.ndarray, np.ndarray]:
    """``gate`` with zero columns and ``bias`` with -inf columns up to a whole number of
    blocks: the padding's logits are -inf, never drawn."""
    e = gate.shape[1]
    width = (e + BLOCKS - 1) // BLOCKS * BLOCKS
    gate_p = np.zeros((gate.shape[0], width), dtype=np.float32)
    gate_p[:, :e] = gate
    bias_p = np.full((bias.shape[0], width), np.float32(-np.inf), dtype=np.float32)
    bias_p[:, :e] = bias
    return gate_p, bias_p


#: Tokens drawn side by side (the module doc says why; 4 measured no faster than 2).
GROUP = 2


@inline_kernel
def weigh(logit: np.ndarray, g: int, weight: np.ndarray, prefix: np.ndarray,
          sums: np.ndarray) -> None:
    """Row ``g``'s weights ``exp(logit - max)`` and their cumulative block sums ``prefix``
    (``sums``: scratch rows of the same shape)."""
    weigh_row(logit, g, weight, sums)
    run = sums[g, 0]
    prefix[g, 0] = run
    for b in range(1, BLOCKS):
        run = sums[g, b] + run
        prefix[g, b] = run


@kernel
def route_tokens(latent: Float32s, gate: Float32s, bias: Float32s, dataset: Int16s,
                 uniforms: Floats, out: Int16s) -> None:
    """``out[t]`` = token ``t``'s ``k`` experts (``k = out.shape[1]``), drawn without
    replacement from ``softmax(bias[dataset[t]] + latent[t] @ gate)`` with the float64
    ``uniforms[t]``; the first draw (the largest Gumbel-perturbed score) goes in the last slot,
    so slots ascend by perturbed score. float32 ``latent`` [tokens, dim], ``gate`` [dim, e],
    ``bias`` [datasets, e], all C-contiguous. ``GROUP`` tokens take their ``j``-th draws in
    turn; each token's arithmetic is the same as alone."""
    k = out.shape[1]
    gate_p, bias_p = padded(gate, bias)
    width = gate_p.shape[1]
    gone = np.float32(-np.inf)
    logit = np.empty((GROUP, width), dtype=np.float32)
    weight = np.zeros((GROUP, width), dtype=np.float32)
    prefix = np.zeros((GROUP, BLOCKS), dtype=np.float64)
    sums = np.zeros((GROUP, BLOCKS), dtype=np.float64)
    rows = width // BLOCKS
    tokens = latent.shape[0]
    for first in range(0, tokens, GROUP):
        n = min(GROUP, tokens - first)
        for g in range(n):
            token_logits(latent, first + g, gate_p, bias_p, dataset[first + g], logit, g)
            weigh(logit, g, weight, prefix, sums)
        for j in range(k):
            for g in range(n):
                # The pick, written out here rather than called: a jitted call taking arrays
                # would count references atomically on every draw. A second try follows a
                # rescale (rounding, or the rest underflowed against the first maximum).
                c = -1
                for attempt in range(2):
                    if attempt:
                        weigh(logit, g, weight, prefix, sums)
                    total = prefix[g, BLOCKS - 1]
                    if total > 0.0:
                        # The block: the count of block prefixes at or below the target; the
                        # expert: the count of that block's partial sums at or below the rest
                        # (counts, not early exits: no mispredicted branches).
                        target = uniforms[first + g, j] * total
                        b = count_at_or_below(prefix, g, target)
                        if b < BLOCKS:
                            rest = target - prefix[g, b - 1] if b else target
                            within, r = 0.0, 0
                            for i in range(rows):
                                within += weight[g, i * BLOCKS + b]
                                r += within <= rest
                            c = b + r * BLOCKS if r < rows else -1
                    if c >= 0:
                        break
                if c < 0:  # the target sits in the last ulp: the last expert with weight
                    c = last_positive(weight[g])
                out[first + g, k - 1 - j] = c
                # Subtracted, not re-summed: a residue left by rounding only sends a draw to
                # the rescale above.
                subtract_from(prefix, g, c % BLOCKS, np.float64(weight[g, c]))
                weight[g, c] = 0.0
                logit[g, c] = gone


@kernel
def last_positive(weight: np.ndarray) -> int:
    """The highest-numbered expert with weight (reached only through rounding)."""
    for c in range(weight.size - 1, -1, -1):
        if weight[c] > 0.0:
            return c
    return -1


@kernel
def ar1_mix(rng: np.random.Generator, state: Float32s, scale: float, rho: np.float32) -> None:
    """``routing.ar1_update`` in one pass over the flat float32 ``state``:
    ``state = float32(z * scale + float64(state * rho))`` with ``z`` float64 standard
    normals drawn in order (numba runs numpy's ziggurat on the Generator's bit generator, so
    ``z`` is ``rng.standard_normal(state.size)``), the state product in float32 and the sum
    in float64, each rounded as numpy's separate ufuncs round it. float64 normals, not
    float32: numba draws them about 5x faster than numpy's float32 ones (benchmarks/README.md)
    and the mix is formed in float64 anyway."""
    for i in range(state.size):
        kept = state[i] * rho
        state[i] = np.float32(rng.standard_normal() * scale + np.float64(kept))


@kernel
def token_latents(
    req: Float32s, tok: Float32s, request: Int32s, w_req: np.float32,
    w_tok: np.float32, out: Float32s,
) -> None:
    """``routing.TokenLatents.mix``: ``w_req * req[request] + w_tok * tok`` in float32."""
    for t in range(tok.shape[0]):
        r = request[t]
        for d in range(tok.shape[1]):
            out[t, d] = w_req * req[r, d] + w_tok * tok[t, d]
