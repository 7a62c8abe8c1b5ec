"""Packing raw samples into packed sequences of ``packed_length`` tokens.

Model assumptions (what production data loaders do):

* samples arrive in a fixed order and are packed greedily *next-fit*: a packed sequence takes
  samples while they fit; the first sample that does not fit closes it (the rest is padding)
  and opens the next one. Samples are never reordered.
* a sample longer than ``L`` is cut into ``L``-token pieces plus a remainder; every piece
  keeps its origin sample id, so the multiset of raw samples of a step can be recovered.
* attention cost of a packed sequence is Σ l² over its pieces (document-masked causal
  attention never crosses a piece boundary).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from libra_des.base.numbers import plain
from libra_des.config import LengthDist, WorkloadSpec
from libra_des.errors import InputError
from libra_des.workload.lengths import Sampler, make_sampler

#: Refuse to cut more pieces than this in one call (see ``cut_pieces``).
MAX_PIECES = 50_000_000


@dataclass(frozen=True)
class PackedBatch:
    """``D`` packed sequences in CSR form.

    ``lengths``: flat piece lengths; ``offsets``: ``D + 1`` CSR offsets into ``lengths``;
    ``sample_ids``: origin raw-sample id of each piece; ``packed_length``: capacity L.
    """

    lengths: np.ndarray
    offsets: np.ndarray
    sample_ids: np.ndarray
    packed_length: int

    def __len__(self) -> int:
        return int(self.offsets.shape[0]) - 1

    def seq(self, i: int) -> np.ndarray:
        """Piece lengths of packed sequence ``i``."""
        return self.lengths[self.offsets[i] : self.offsets[i + 1]]

    def seqs(self) -> list[np.ndarray]:
        """Every packed sequence's piece lengths (views, no copies)."""
        return [self.seq(i) for i in range(len(self))]

    def counts(self) -> np.ndarray:
        """Pieces per packed sequence."""
        return np.diff(self.offsets)

    def tokens(self) -> np.ndarray:
        """Tokens per packed sequence (<= L; the rest is padding)."""
        return segment_sum(self.lengths.astype(np.int64), self.offsets)

    def sum_sq(self) -> np.ndarray:
        """Σ l² per packed sequence (float64): the attention-FLOPs proxy F_i."""
        sq = self.lengths.astype(np.float64) ** 2
        return segment_sum(sq, self.offsets)

    def take(self, order: np.ndarray) -> PackedBatch:
        """A batch holding sequences ``order`` (in that order); pieces keep their order."""
        order = np.asarray(order, dtype=np.int64)
        counts = self.counts()[order]
        new_offsets = np.zeros(order.size + 1, dtype=np.int64)
        np.cumsum(counts, out=new_offsets[1:])
        shift = np.repeat(self.offsets[order] - new_offsets[:-1], counts)
        index = shift + np.arange(int(new_offsets[-1]), dtype=np.int64)
        return PackedBatch(
            self.lengths[index], new_offsets, self.sample_ids[index], self.packed_length
        )


def segment_sum(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Sum of ``values`` over each CSR segment (segments are never empty here)."""
    csum = np.zeros(values.size + 1, dtype=values.dtype)
    np.cumsum(values, out=csum[1:])
    result: np.ndarray = csum[offsets[1:]] - csum[offsets[:-1]]
    return result


def uncut(lengths: np.ndarray, packed_length: int) -> bool:
    """Whether int64 ``lengths`` (refused unless positive) are pieces as they are: some
    samples, none longer than L."""
    if lengths.size and lengths.min() <= 0:
        raise InputError("lengths", int(lengths.min()), "positive sample lengths")
    return 0 < lengths.size <= MAX_PIECES and int(lengths.max()) <= packed_length


def cut_pieces(
    lengths: np.ndarray, packed_length: int, first_id: int = 0, owned: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Cut samples longer than L into L-sized pieces plus remainder -> (pieces, sample ids).

    The pieces never alias the caller's array, unless ``owned`` says the caller hands it over
    (an int64 array it made and no longer uses): with nothing to cut, that array itself is
    the pieces (a stream's window of millions of samples, where a copy is a fresh mapping).
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    if uncut(lengths, packed_length):
        # Nothing to cut (the usual case): the same pieces, without the repeat machinery.
        ids = np.arange(first_id, first_id + lengths.size, dtype=np.int64)
        return (lengths if owned else lengths.copy()), ids
    reps = -(-lengths // packed_length)
    if int(reps.sum()) > MAX_PIECES:
        # An uncapped heavy tail can draw absurd lengths; refuse rather than exhaust memory.
        raise InputError("workload.lengths.max", int(lengths.max()),
                         f"a hard max so that a window cuts into <= {MAX_PIECES:,} pieces")
    ids = np.repeat(np.arange(first_id, first_id + lengths.size, dtype=np.int64), reps)
    starts = np.repeat(np.cumsum(reps) - reps, reps)
    # k-th piece of its sample: L tokens, except the last which takes what is left.
    k = np.arange(ids.size, dtype=np.int64) - starts
    pieces = np.minimum(np.repeat(lengths, reps) - k * packed_length, packed_length)
    return pieces, ids


def next_fit_offsets(pieces: np.ndarray, packed_length: int) -> np.ndarray:
    """CSR offsets of next-fit packing of ``pieces`` (each <= L), in arrival order.

    One ``searchsorted`` per packed sequence, not a Python step per sample.
    """
    csum = np.zeros(pieces.size + 1, dtype=np.int64)
    np.cumsum(pieces, out=csum[1:])
    offsets = [0]
    start = 0
    # The method: np.searchsorted's dispatch adds to each call (benchmarks/README.md).
    find = csum.searchsorted
    while start < pieces.size:
        end = int(find(csum[start] + packed_length, side="right")) - 1
        offsets.append(end)
        start = end
    return np.asarray(offsets, dtype=np.int64)


def pack(lengths: np.ndarray, packed_length: int, first_id: int = 0) -> PackedBatch:
    """Next-fit packing of raw samples ``lengths`` (ids ``first_id, first_id+1, ...``)."""
    if packed_length <= 0:
        raise InputError("workload.packed_length", packed_length, "> 0")
    pieces, ids = cut_pieces(lengths, packed_length, first_id)
    return PackedBatch(pieces, next_fit_offsets(pieces, packed_length), ids, packed_length)


class CorpusStream:
    """An endless, seeded stream of raw samples packed into windows of ``d`` sequences.

    The last packed sequence of what has been drawn is still open (a later sample might fit),
    so a window only takes closed sequences; the pieces of the open one and after are kept
    for the next window, which is exactly what continuing next-fit would give.
    """

    def __init__(self, dist: LengthDist, packed_length: int, rng: np.random.Generator) -> None:
        if packed_length <= 0:
            raise InputError("workload.packed_length", packed_length, "> 0")
        self.packed_length = packed_length
        self.rng = rng
        self.sampler: Sampler = make_sampler(dist)
        self.next_id = 0
        self.drawn_tokens = 0
        self.pending = np.zeros(0, dtype=np.int64)
        #: The pending pieces' sample ids; None while they are one piece a sample, so
        #: consecutive up to ``next_id`` (the pending pieces end the drawn stream): a window's
        #: millions of ids are then made once, for the window, instead of being filled for
        #: each draw and copied into the pending ones (each a fresh mapping of tens of MiB).
        self.pending_ids: np.ndarray | None = None
        self.peeked: tuple[int, PackedBatch] | None = None

    def peek_window(self, d: int) -> PackedBatch:
        """The window the next ``next_window(d)`` returns, drawn now and kept for that call.

        A run looks at its first window before planning (memory check, ``auto`` TAP knobs):
        drawing it once instead of from a copy of the stream saves a whole window's sampling
        (a large share of planning at the largest scales) and its memory.
        """
        if self.peeked is None:
            self.peeked = (d, self.next_window(d))
        if self.peeked[0] != d:  # a caller's bug, not the user's input
            raise ValueError(f"peeked a window of {self.peeked[0]}, asked for {d}")
        return self.peeked[1]

    def draw(self, tokens_wanted: int) -> None:
        """Append fresh samples worth about ``tokens_wanted`` tokens to the pending pieces."""
        mean = self.drawn_tokens / self.next_id if self.next_id else None
        n = 256 if mean is None else max(64, math.ceil(1.1 * tokens_wanted / mean))
        if mean is not None and n > MAX_PIECES:
            # Refused before drawing them: tens of millions of tiny samples cost seconds and
            # gigabytes, and the window could not hold them anyway.
            raise InputError("workload.lengths", f"samples of {plain(mean)} tokens on average",
                             f"lengths whose window of {tokens_wanted:,} tokens is "
                             f"<= {MAX_PIECES:,} pieces")
        raw = np.asarray(self.sampler(n, self.rng), dtype=np.int64)  # a plug-in law's too
        self.drawn_tokens += int(raw.sum())
        if self.pending_ids is None and uncut(raw, self.packed_length):
            pieces, ids = raw, None  # one piece a sample: the ids stay implicit
        else:
            pieces, fresh = cut_pieces(raw, self.packed_length, self.next_id, owned=True)
            ids = np.concatenate([self.ids_of(self.pending.size), fresh])
        self.next_id += n
        if self.pending.size:
            pieces = np.concatenate([self.pending, pieces])
        self.pending, self.pending_ids = pieces, ids  # the fresh arrays are ours (no copy)

    def ids_of(self, count: int) -> np.ndarray:
        """Sample ids of the first ``count`` pending pieces."""
        if self.pending_ids is not None:
            return self.pending_ids[:count]
        first = self.next_id - self.pending.size
        return np.arange(first, first + count, dtype=np.int64)

    def next_window(self, d: int) -> PackedBatch:
        """Exactly ``d`` packed sequences; leftover samples wait for the next window."""
        if d <= 0:
            raise InputError("gbs", d, "> 0")
        if self.peeked is not None:
            batch = self.peek_window(d)
            self.peeked = None
            return batch
        while True:
            offsets = next_fit_offsets(self.pending, self.packed_length)
            if offsets.size - 1 > d:
                break
            self.draw((d + 1 - (offsets.size - 1)) * self.packed_length)
        cut = int(offsets[d])
        batch = PackedBatch(
            self.pending[:cut], offsets[: d + 1], self.ids_of(cut), self.packed_length
        )
        self.pending = self.pending[cut:]
        if self.pending_ids is not None:
            self.pending_ids = self.pending_ids[cut:]
        return batch


def make_stream(workload: WorkloadSpec, rng: np.random.Generator) -> CorpusStream:
    """The packed-sequence stream of a training workload."""
    if workload.lengths is None:
        raise InputError("workload.lengths", None, "a length distribution for training")
    return CorpusStream(workload.lengths, workload.packed_length, rng)
