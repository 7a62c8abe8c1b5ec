"""Core-attention work proxies for packed sequences (docs/model.md part A).

A packed sequence is a run of raw samples laid end to end; attention is causal *inside* each
sample and never crosses a sample boundary (varlen masks). Model assumptions:

* The work of a query is the number of keys it attends to; the work of a packed sequence is
  the sum over its queries ("causal pairs"). A sample of length ``l`` gives ``l(l+1)/2``.
* ``sum_sq`` (Σ l²) is the paper's load proxy F_i for grouping; it is proportional to the
  exact pair count up to the linear term.
* Blocks cut a packed sequence at global token positions 0, B, 2B, ... (no extra cut at sample
  boundaries; the last block may be shorter). The queries of sample ``j`` that fall in block
  ``b`` have sample-local positions ``a..e-1`` and contribute Σ_{q=a}^{e-1} (q+1) pairs.
* The sliding-window variant lets each query see at most ``window`` keys (itself included),
  so query ``q`` contributes ``min(q+1, window)`` pairs.

Everything is vectorised over (sample, block) segments: a sample crosses at most
``ceil(l/B)+1`` blocks, so the segment count is about ``n_samples + n_blocks``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from libra_des.errors import InputError
from libra_des.workload.packing import segment_sum


@dataclass(frozen=True)
class Segments:
    """The (sample, block) intersections of one packed sequence, in block order.

    ``block[k]``, ``sample[k]``: which block and which sample (index into the lengths array);
    ``a[k]``, ``e[k]``: sample-local query range ``[a, e)`` inside the block;
    ``pairs[k]``: causal (or windowed) pairs of those queries.
    ``block_starts``/``block_ends``: global token range of every block.
    """

    block: np.ndarray
    sample: np.ndarray
    a: np.ndarray
    e: np.ndarray
    pairs: np.ndarray
    block_starts: np.ndarray
    block_ends: np.ndarray

    @property
    def blocks(self) -> int:
        return int(self.block_starts.shape[0])


def as_lengths(sample_lengths: np.ndarray | list[int], field: str = "lengths") -> np.ndarray:
    """Validate raw sample lengths: a 1-D array of positive integers (int64 copy)."""
    arr = np.asarray(sample_lengths)
    if arr.ndim != 1:
        raise InputError(field, f"array of shape {arr.shape}", "a 1-D list of lengths")
    if arr.dtype.kind not in "iu" and arr.size:
        bad = ~np.isfinite(arr) | (np.mod(arr, 1) != 0)
        if bad.any():
            raise InputError(field, arr[bad][0], "integer token counts")
    out = arr.astype(np.int64)
    if out.size and out.min() <= 0:
        raise InputError(field, int(out.min()), "positive sample lengths")
    return out


def sum_sq(lengths: np.ndarray | list[int]) -> float:
    """Σ l² of one packed sequence (the paper's grouping weight F_i)."""
    arr = as_lengths(lengths).astype(np.float64)
    return float(np.dot(arr, arr))


def sum_sq_segments(lengths: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Σ l² of every packed sequence of a CSR batch (``offsets`` has D+1 entries)."""
    sq = np.asarray(lengths, dtype=np.float64) ** 2
    return segment_sum(sq, np.asarray(offsets, dtype=np.int64))


def causal_pairs(lengths: np.ndarray | list[int]) -> int:
    """Exact causal pair count Σ l(l+1)/2 of one packed sequence."""
    arr = as_lengths(lengths)
    return int(np.sum(arr * (arr + 1) // 2))


def prefix_pairs(x: np.ndarray, window: int | None) -> np.ndarray:
    """Pairs of the first ``x`` queries of a sample: Σ_{q<x} min(q+1, window).

    Without a window this is the triangle number x(x+1)/2; with one it is the triangle up to
    ``window`` plus ``window`` keys for every later query.
    """
    if window is None:
        triangle: np.ndarray = x * (x + 1) // 2
        return triangle
    head = np.minimum(x, window)
    result: np.ndarray = head * (head + 1) // 2 + window * np.maximum(x - window, 0)
    return result


def segments(
    sample_lengths: np.ndarray | list[int], block_size: int, window: int | None = None
) -> Segments:
    """Cut one packed sequence into blocks of ``block_size`` tokens and list the segments."""
    if block_size <= 0:
        raise InputError("block_size", block_size, "a positive number of tokens")
    if window is not None and window <= 0:
        raise InputError("window", window, "a positive number of keys")
    lens = as_lengths(sample_lengths)
    starts = np.cumsum(lens) - lens
    total = int(lens.sum())
    nblocks = -(-total // block_size)
    block_starts = np.arange(nblocks, dtype=np.int64) * block_size
    block_ends = np.minimum(block_starts + block_size, total)
    first = starts // block_size
    sample, pos = expand_runs((starts + lens - 1) // block_size - first + 1)
    block = first[sample] + pos
    a = np.maximum(block_starts[block], starts[sample]) - starts[sample]
    e = np.minimum(block_ends[block], starts[sample] + lens[sample]) - starts[sample]
    pairs = prefix_pairs(e, window) - prefix_pairs(a, window)
    return Segments(block, sample, a, e, pairs, block_starts, block_ends)


def expand_runs(count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For consecutive runs of ``count[i]`` items: each item's run index and position in it."""
    count = np.asarray(count, dtype=np.int64)
    owner = np.repeat(np.arange(count.size, dtype=np.int64), count)
    pos = np.arange(owner.size, dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
    return owner, pos


def per_block(seg: Segments, values: np.ndarray) -> np.ndarray:
    """Sum a per-segment quantity per block (segments are sorted by block, every block has one)."""
    if seg.blocks == 0:
        return np.zeros(0, dtype=values.dtype)
    heads = np.flatnonzero(np.concatenate([[True], seg.block[1:] != seg.block[:-1]]))
    return np.add.reduceat(values, heads)


def block_pairs(
    sample_lengths: np.ndarray | list[int], block_size: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact causal pair count of every block: ``(block_starts, block_ends, pairs)``."""
    seg = segments(sample_lengths, block_size)
    return seg.block_starts, seg.block_ends, per_block(seg, seg.pairs)


def block_pairs_window(
    sample_lengths: np.ndarray | list[int], block_size: int, window: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Like :func:`block_pairs` with each query attending to at most ``window`` keys."""
    seg = segments(sample_lengths, block_size, window)
    return seg.block_starts, seg.block_ends, per_block(seg, seg.pairs)


def block_doc_len(seg: Segments, sample_lengths: np.ndarray) -> np.ndarray:
    """Pair-weighted mean document length of every block.

    FlashAttention's efficiency depends on how long the documents are whose pairs it computes,
    so each segment's document length is weighted by the pairs it contributes.
    """
    lens = np.asarray(sample_lengths, dtype=np.float64)
    pairs = seg.pairs.astype(np.float64)
    num = per_block(seg, pairs * lens[seg.sample])
    den = per_block(seg, pairs)
    result: np.ndarray = np.divide(num, den, out=np.zeros_like(num), where=den > 0)
    return result


def doc_len(sample_lengths: np.ndarray | list[int]) -> float:
    """Pair-weighted mean document length of a whole packed sequence."""
    lens = as_lengths(sample_lengths).astype(np.float64)
    pairs = lens * (lens + 1) / 2
    total = float(pairs.sum())
    return float(np.dot(pairs, lens) / total) if total > 0 else 0.0
