"""Fast exact building blocks of routing's predictors: top-k and thin products.

Each function reproduces, bit for bit, what a plainer numpy call would give (tests/
test_sampling.py compares them):

* :func:`top_k_ascending` equals the tail of ``np.argpartition(scores, e - k, axis=1)`` as
  numpy 2's AVX-512 builds return it (the k largest in ascending score order), for any row
  whose k+1 largest scores are distinct; rows with ties among them are left to
  ``argpartition`` itself, so its tie-breaking still decides. Other builds order the k
  slots differently; the k experts are the same on every build.
* :func:`thin_matmul` is ``a @ b`` in row blocks (each element is the same dot product).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Scratch:
    """Reusable buffers for blocks of up to ``rows`` rows of scores (all overwritten).

    Fresh megabyte temporaries per block cost more in page faults than the arithmetic.
    """

    words: np.ndarray  # int32 [2, rows, cols]
    columns: np.ndarray  # int32 [rows, cols], every row 0 .. cols - 1

    @classmethod
    def of(cls, rows: int, cols: int) -> Scratch:
        columns = np.broadcast_to(np.arange(cols, dtype=np.int32), (rows, cols)).copy()
        return cls(np.empty((2, rows, cols), dtype=np.int32), columns)

    def head(self, rows: int) -> Scratch:
        """The buffers' first ``rows`` rows."""
        return Scratch(self.words[:, :rows], self.columns[:rows])


def column_bits(columns: int) -> int:
    """Bits that number ``columns`` columns."""
    return max(1, (columns - 1).bit_length())


def ordered_bits(scores: np.ndarray, out: np.ndarray, sign: np.ndarray) -> np.ndarray:
    """Fill int32 ``out`` with integers ordered like float32 ``scores`` (``sign``: scratch).

    A float32's bits read as sign and magnitude; as the signed integer ``+-magnitude`` they
    order like the float (no NaN here), with -0.0 and +0.0 equal, as they compare.
    """
    bits = scores.view(np.int32)
    np.right_shift(bits, 31, out=sign)  # -1 for negatives, 0 otherwise
    np.bitwise_and(bits, 0x7FFFFFFF, out=out)
    out ^= sign  # two's complement negation: (m ^ -1) - (-1) = -m
    out -= sign
    return out


def exact_top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """:func:`top_k_ascending` by int64 keys (whole score, then column): for a few rows."""
    e = scores.shape[1]
    shift = column_bits(e)
    keys = ordered_bits(scores, np.empty(scores.shape, dtype=np.int32),
                        np.empty(scores.shape, dtype=np.int32)).astype(np.int64)
    keys <<= shift
    keys |= np.arange(e, dtype=np.int64)
    keys.sort(axis=1)
    tail = keys[:, e - k - 1 :]
    out = tail[:, 1:] & ((1 << shift) - 1)
    values = tail >> shift
    tied = np.flatnonzero((values[:, 1:] == values[:, :-1]).any(axis=1))
    if tied.size:  # argpartition's own tie-breaking decides these rows
        out[tied] = np.argpartition(scores[tied], e - k, axis=1)[:, e - k :]
    return np.asarray(out)


def top_k_ascending(
    scores: np.ndarray, k: int, scratch: Scratch | None = None
) -> np.ndarray:
    """``[rows, k]`` column indices of each row's ``k`` largest scores, ascending by score.

    numpy sorts short rows of plain integers several times faster than it arg-partitions
    them, so each score becomes an int32 key: its order-preserving bits with the low
    ``column_bits`` replaced by the column. Keys order like (score, column) unless two scores
    differ only in those low bits; rows where that happens among the k+1 largest (under one
    in a thousand rows of float scores) are redone by :func:`exact_top_k`. ``scores``: float32.
    """
    rows, e = scores.shape
    if k >= e:
        return np.asarray(np.argpartition(scores, e - k, axis=1)[:, e - k :])
    scratch = Scratch.of(rows, e) if scratch is None else scratch
    shift = column_bits(e)
    sign, keys = scratch.words
    ordered_bits(scores, keys, sign)
    keys &= ~((1 << shift) - 1)  # rounds towards -inf, so the order is kept
    keys |= scratch.columns  # a full array: a broadcast row is slower here
    return top_k_of_keys(scores, keys, k)


def top_k_of_keys(scores: np.ndarray, keys: np.ndarray, k: int) -> np.ndarray:
    """:func:`top_k_ascending` from its int32 ``keys`` of ``scores`` (sorted in place)."""
    e = scores.shape[1]
    shift = column_bits(e)
    keys.sort(axis=1)
    tail = keys[:, e - k - 1 :]
    out = (tail[:, 1:] & ((1 << shift) - 1)).astype(np.int64)
    coarse = tail >> shift
    unsure = np.flatnonzero((coarse[:, 1:] == coarse[:, :-1]).any(axis=1))
    if unsure.size:
        out[unsure] = exact_top_k(scores[unsure], k)
    return out


#: Multiply-adds per BLAS call of a thin product. OpenBLAS keeps a product of at most 2**18
#: on one thread; a larger one wakes its thread pool, whose hand-offs cost far more than a
#: [tokens, 8] x [8, experts] product (measured on the 2-core CI machine, one MoE layer of
#: 16k tokens: 0.5 ms in 256-row calls, 2.4 ms in one call, 26 ms in 1024-row calls).
BLAS_SINGLE_THREAD = 1 << 18


def thin_matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``a @ b`` into ``out`` in row blocks small enough for one BLAS thread.

    Each output element is one dot product over ``a``'s short rows: the result is the
    product taken block by block, whatever the thread count. One large ``a @ b`` can differ
    from it in the last bit where BLAS splits the product over its threads (seen with
    OpenBLAS on an AMD EPYC host), so the blocks, not that product, define the draw.
    """
    rows, inner = a.shape
    block = max(1, BLAS_SINGLE_THREAD // max(inner * b.shape[1], 1))
    whole = rows // block * block
    if whole:
        np.matmul(a[:whole].reshape(-1, block, inner), b,
                  out=out[:whole].reshape(-1, block, b.shape[1]))
    if whole < rows:
        np.matmul(a[whole:], b, out=out[whole:])
    return out
