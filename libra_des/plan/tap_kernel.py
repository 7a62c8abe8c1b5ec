"""TAP's kernels (numba): the greedy placement of :func:`tap.place`, the exchange plan's KV
rows and byte matrices, K(t)'s CSR, the holdings and the per-worker sums.

The greedy is docs/model.md part A's, with its tie-breaks (tests/reference/tap.py holds the
literal numpy form over a dense [G, W] matrix of missing tokens; tests/test_tap_kernel.py
compares the two). Δcomm comes from holdings and fetches instead of that matrix, see
:func:`greedy`:

* integer Δcomm arithmetic in int64;
* the capacity tests ``load + f <= C`` and ``load <= C - f`` compare in float64 (exact while
  the pool's total FLOPs stay below 2**53);
* ``choose`` takes the minimum of (Δcomm, load, id) over the candidates (non-candidates read
  as int64 max), else of (load, Δcomm, id).

Compiled functions are cached on disk (``cache=True``, in ``base.kernel``'s folder):
the first call ever compiles, later processes load the cache.
"""

from __future__ import annotations

import numpy as np

from libra_des.base.kernel import Floats, Ints, inline_kernel, kernel


@inline_kernel
def better(a1: int, a2: int, aw: int, b1: int, b2: int, bw: int) -> bool:
    """(a1, a2, aw) < (b1, b2, bw) lexicographically."""
    return a1 < b1 or (a1 == b1 and (a2 < b2 or (a2 == b2 and aw < bw)))


@kernel
def choose(base: int, sub: np.ndarray, mark: np.ndarray, touched: np.ndarray, count: int,
           load: np.ndarray, headroom: float, kv_bpt: int, q: int, home: int) -> int:
    """argmin (Δcomm, load, id) over workers with load <= headroom, else (load, Δcomm, id).

    The reference takes the minimum primary key, then, among equals, the lowest (secondary,
    id), reading non-candidates as int64 max; that is the lexicographic minimum of
    (primary, secondary, id) over the candidates when there is one (keys never reach int64
    max: Δcomm and loads are byte and pair counts far below it), else over all workers.
    A worker's missing tokens are ``base - sub[w]``, and ``sub`` is nonzero only for the
    ``count`` workers in ``touched`` (marked in ``mark``; the tile's Q-home is always one):
    every other worker has the same Δcomm, ``base * kv_bpt + q``, so only the one of them
    with the least (load, id) can win, and it is found by two branch-free passes over the
    loads instead of keying every worker.
    """
    big = np.iinfo(np.int64).max
    workers = load.shape[0]
    low, rest = big, big
    for w in range(workers):
        low = min(low, load[w])
        rest = min(rest, big if mark[w] else load[w])
    other = workers
    for w in range(workers):
        other = min(other, w if (load[w] == rest and not mark[w]) else workers)
    any_cand = low <= headroom
    arg, first, second = -1, 0, 0
    for i in range(count + 1):
        w = touched[i] if i < count else other
        if w == workers:
            break
        dw = (base - sub[w]) * kv_bpt + (0 if w == home else q)
        k1, k2 = (dw, load[w]) if any_cand else (load[w], dw)
        if any_cand and load[w] > headroom:
            continue
        if arg < 0 or better(k1, k2, w, first, second, arg):
            arg, first, second = w, k1, k2
    return arg


@inline_kernel
def held(j: int, w: int, hold_ptr: Ints, hold_worker: Ints, hold_tokens: Ints) -> int:
    """Tokens of sample ``j`` that worker ``w`` holds before balancing."""
    for e in range(hold_ptr[j], hold_ptr[j + 1]):
        if hold_worker[e] == w:
            return int(hold_tokens[e])
    return 0


@inline_kernel
def fetched(g: int, w: int, head: np.ndarray, nxt: np.ndarray, who: np.ndarray) -> bool:
    """Whether worker ``w`` fetched group ``g`` already: a walk of g's list of fetchers (a
    group is read by about one tile: a short list, where a dense [G, W] table of flags
    costs a fresh allocation per pool and a cache line per look-up)."""
    e = head[g]
    while e >= 0:
        if who[e] == w:
            return True
        e = nxt[e]
    return False


@kernel
def greedy(
    order: Ints,
    flops: Ints,
    q_home: Ints,
    qo: Ints,
    ptr: Ints,
    gids: Ints,
    glen: Ints,
    h_count: int,
    hold_ptr: Ints,
    hold_worker: Ints,
    hold_tokens: Ints,
    workers: int,
    kv_bpt: int,
    capacity: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The reference's loop over tiles in ``order``, without its dense [G, W] matrix.

    missing[g, w] is 0 once w fetched g, else ``glen[g]`` less what w holds of g's sample
    (``hold_*``: the holdings of sample j in rows ``hold_ptr[j]:hold_ptr[j+1]``, one per
    worker). So Δcomm is Σ glen over K(t) for every worker less what the holders and the
    fetchers of each group (kept in per-group linked lists) save, which gives the
    reference's integers exactly while touching a few workers per tile instead of all.
    """
    n = flops.shape[0]
    load = np.zeros(workers, dtype=np.int64)
    chosen = np.zeros(n, dtype=np.int64)
    delta = np.zeros(n, dtype=np.int64)
    sub = np.zeros(workers, dtype=np.int64)  # tokens a touched worker saves of K(t)
    mark = np.zeros(workers, dtype=np.bool_)
    touched = np.empty(workers, dtype=np.int64)
    head = np.full(glen.shape[0], -1, dtype=np.int64)  # newest fetcher entry of each group
    nxt = np.empty(gids.shape[0], dtype=np.int64)  # at most one entry per (tile, group)
    who = np.empty(gids.shape[0], dtype=np.int64)
    sample = gids // h_count  # once per entry: a division costs more than the rest of a visit
    entries = 0
    for i in range(order.shape[0]):
        t = order[i]
        f, home = flops[t], q_home[t]
        lo, hi = ptr[t], ptr[t + 1]
        if load[home] + f <= capacity:
            resident = True
            for k in range(lo, hi):
                g = gids[k]
                if not fetched(g, home, head, nxt, who) and held(
                        sample[k], home, hold_ptr, hold_worker, hold_tokens) != glen[g]:
                    resident = False
                    break
            if resident:
                load[home] += f
                chosen[t] = home
                continue
        base, count = 0, 0
        for k in range(lo, hi):
            g = gids[k]
            base += glen[g]
            # The holders that did not fetch g save what they hold, its fetchers all of it;
            # each worker is listed in `touched` on its first saving (written out here: a
            # kernel call per saving, with its arrays, costs several times the saving).
            for e in range(hold_ptr[sample[k]], hold_ptr[sample[k] + 1]):
                w = hold_worker[e]
                if not fetched(g, w, head, nxt, who):
                    if not mark[w]:
                        mark[w], touched[count], count = True, w, count + 1
                    sub[w] += hold_tokens[e]
            e = head[g]
            while e >= 0:
                w = who[e]
                if not mark[w]:
                    mark[w], touched[count], count = True, w, count + 1
                sub[w] += glen[g]
                e = nxt[e]
        if not mark[home]:
            mark[home], touched[count], count = True, home, count + 1
        q = qo[t]
        r = choose(base, sub, mark, touched, count, load, capacity - f, kv_bpt, q, home)
        delta[t] = (base - sub[r]) * kv_bpt + (0 if r == home else q)
        for m in range(count):
            sub[touched[m]], mark[touched[m]] = 0, False
        for k in range(lo, hi):
            g = gids[k]
            if not fetched(g, r, head, nxt, who):
                who[entries], nxt[entries], head[g] = r, head[g], entries
                entries += 1
        load[r] += f
        chosen[t] = r
    return chosen, load, delta


@kernel
def kv_fetches(
    group_ptr: Ints,
    group_ids: Ints,
    worker: Ints,
    groups: int,
    h_count: int,
    hold_ptr: Ints,
    hold_worker: Ints,
    hold_tokens: Ints,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(group, source, destination, tokens) of every KV piece the placement moves.

    The rows of ``tap.exchange_plan``'s numpy path in its order: distinct (group,
    destination) pairs sorted by group then destination, each expanded into the pieces of
    the group's sample in holdings order, dropping pieces the destination already holds.
    Pairs are bucketed by group (counting sort) instead of marked in a dense [G, W] table.
    """
    n = group_ids.shape[0]
    count = np.zeros(groups + 1, dtype=np.int64)
    for k in range(n):
        count[group_ids[k] + 1] += 1
    for g in range(groups):
        count[g + 1] += count[g]
    fill = count[:-1].copy()
    dest = np.empty(n, dtype=np.int64)
    for t in range(group_ptr.shape[0] - 1):
        r = worker[t]
        for k in range(group_ptr[t], group_ptr[t + 1]):
            g = group_ids[k]
            dest[fill[g]] = r
            fill[g] += 1
    samples = groups // h_count  # groups are j*H + h
    sample_of = np.empty(samples * h_count, dtype=np.int64)  # j of g, with no division
    size = 0
    for j in range(samples):  # upper bound of the rows: pairs x pieces of their sample
        sample_of[j * h_count:(j + 1) * h_count] = j
        size += ((count[(j + 1) * h_count] - count[j * h_count])
                 * (hold_ptr[j + 1] - hold_ptr[j]))
    out_g = np.empty(size, dtype=np.int64)
    out_s = np.empty(size, dtype=np.int64)
    out_d = np.empty(size, dtype=np.int64)
    out_k = np.empty(size, dtype=np.int64)
    rows = 0
    for g in range(samples * h_count):
        lo, hi = count[g], count[g + 1]
        if lo == hi:
            continue
        if hi - lo > 32:  # many readers (tiny blocks): a real sort
            dest[lo:hi] = np.sort(dest[lo:hi])
        for i in range(lo + 1, hi):  # insertion sort: a group has a few destinations
            v, m = dest[i], i - 1
            while m >= lo and dest[m] > v:
                dest[m + 1] = dest[m]
                m -= 1
            dest[m + 1] = v
        j = sample_of[g]
        for i in range(lo, hi):
            dst = dest[i]
            if i > lo and dst == dest[i - 1]:
                continue
            for e in range(hold_ptr[j], hold_ptr[j + 1]):
                src = hold_worker[e]
                if src != dst:
                    out_g[rows], out_s[rows], out_d[rows] = g, src, dst
                    out_k[rows] = hold_tokens[e]
                    rows += 1
    return out_g[:rows], out_s[:rows], out_d[:rows], out_k[:rows]


@kernel
def tile_groups(seg_sample: Ints, seg_count: Ints, h_count: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """``tap.tile_groups``: CSR of K(t), tile ``b*H + h`` reading group ``j*H + h`` for every
    sample j of block b in segment order (integers only, so the same arrays)."""
    blocks = seg_count.shape[0]
    tile_ptr = np.zeros(blocks * h_count + 1, dtype=np.int64)
    ids = np.empty(seg_sample.shape[0] * h_count, dtype=np.int64)
    first, pos = 0, 0
    for b in range(blocks):
        count = seg_count[b]
        for h in range(h_count):
            t = b * h_count + h
            tile_ptr[t + 1] = tile_ptr[t] + count
            for k in range(first, first + count):
                ids[pos] = seg_sample[k] * h_count + h
                pos += 1
        first += count
    return tile_ptr, ids


@kernel
def holdings(lens: Ints, sizes: Ints, cp: int, packed_length: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``tap.holdings`` (sample, worker, tokens rows, in sample then shard order) of the
    sequences whose samples are ``lens``, ``sizes[p]`` of them in sequence ``p``."""
    bounds = np.arange(cp + 1) * packed_length // cp
    rows = 0
    for p in range(sizes.shape[0]):  # upper bound: every sample overlaps one shard more
        rows += sizes[p] + cp
    sample = np.empty(rows, dtype=np.int64)
    worker = np.empty(rows, dtype=np.int64)
    tokens = np.empty(rows, dtype=np.int64)
    j, n = 0, 0
    for p in range(sizes.shape[0]):
        start, c = 0, 0
        for _ in range(sizes[p]):
            end = start + lens[j]
            while bounds[c + 1] <= start:  # the shard holding the sample's first token
                c += 1
            k = c
            while True:
                sample[n], worker[n] = j, p * cp + k
                tokens[n] = min(bounds[k + 1], end) - max(bounds[k], start)
                n += 1
                if bounds[k + 1] >= end:
                    break
                k += 1
            start = end
            j += 1
    return sample[:n], worker[:n], tokens[:n]


@kernel
def pair_bytes(group_ptr: Ints, group_ids: Ints, worker: Ints, groups: int,
               h_count: int, hold_ptr: Ints, hold_worker: Ints,
               hold_tokens: Ints, kv_bytes_per_token: int, q_home: Ints,
               q_bytes: Ints, o_bytes: Ints, workers: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """``tap.exchange_plan``'s [W, W] dispatch (the KV pieces :func:`kv_fetches` lists, then
    each remote tile's Q) and return (each remote tile's O) bytes, from the placement alone
    (the batch planner's path, which needs no KV rows).

    The distinct (group, destination) pairs are found tile by tile, each group's
    destinations so far kept as bits (one int64 word per 64 workers). Every addend is an
    integer byte count and every sum stays far below 2**53 (a pair moves petabytes before
    that), so the float64 sums are exact in any order: the same matrices, bit for bit, as
    adding :func:`kv_fetches`' rows (:func:`exchange`).
    """
    dispatch = np.zeros(workers * workers)
    words = (workers + 63) // 64
    seen = np.zeros(groups * words, dtype=np.int64)
    sample_of = np.empty(groups, dtype=np.int64)  # j of g = j*H + h, with no division
    for j in range(groups // h_count):
        sample_of[j * h_count:(j + 1) * h_count] = j
    for t in range(worker.shape[0]):
        dst = worker[t]
        word, bit = dst >> 6, np.int64(1) << (dst & 63)
        for k in range(group_ptr[t], group_ptr[t + 1]):
            g = group_ids[k]
            at = g * words + word
            if seen[at] & bit:
                continue
            seen[at] |= bit
            j = sample_of[g]
            for e in range(hold_ptr[j], hold_ptr[j + 1]):
                src = hold_worker[e]
                if src != dst:
                    dispatch[src * workers + dst] += float(hold_tokens[e] * kv_bytes_per_token)
    return tile_bytes(dispatch, worker, q_home, q_bytes, o_bytes, workers)


@kernel
def tile_bytes(dispatch: np.ndarray, worker: Ints, q_home: Ints,
               q_bytes: Ints, o_bytes: Ints, workers: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """Each remote tile's Q added to the flat dispatch bytes (which hold the KV pieces), and
    its O as the return bytes: both as [W, W] matrices."""
    ret = np.zeros(workers * workers)
    for t in range(worker.shape[0]):
        src, dst = q_home[t], worker[t]
        if src != dst:
            dispatch[src * workers + dst] += float(q_bytes[t])
            ret[dst * workers + src] += float(o_bytes[t])
    return dispatch.reshape((workers, workers)), ret.reshape((workers, workers))


@kernel
def worker_work(worker: Ints, flops: Ints, doc_len: Floats, workers: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """``tap.fold_attention_plan``'s per-worker Σ f·doc_len and Σ f (float64, added in tile
    order as ``np.bincount`` adds them)."""
    weight = np.zeros(workers)
    pairs = np.zeros(workers)
    for t in range(worker.shape[0]):
        f = float(flops[t])
        weight[worker[t]] += f * doc_len[t]
        pairs[worker[t]] += f
    return weight, pairs


@kernel
def tile_tables(seg_sample: Ints, seg_count: Ints, h_count: int, lens: Ints,
                sizes: Ints, cp: int, packed_length: int) -> tuple[np.ndarray, ...]:
    """:func:`tile_groups` and :func:`holdings` of one pool in one call: ``tap.build_tiles``
    needs both, and each kernel a process calls is one more cached library to load."""
    ptr, ids = tile_groups(seg_sample, seg_count, h_count)
    sample, worker, tokens = holdings(lens, sizes, cp, packed_length)
    return ptr, ids, sample, worker, tokens


@kernel
def exchange(group_ptr: Ints, group_ids: Ints, worker: Ints, groups: int,
             h_count: int, hold_ptr: Ints, hold_worker: Ints,
             hold_tokens: Ints, kv_bytes_per_token: int, q_home: Ints,
             q_bytes: Ints, o_bytes: Ints, workers: int) -> tuple[np.ndarray, ...]:
    """``tap.exchange_plan``: :func:`kv_fetches` (its tokens as bytes), their sums, then
    :func:`tile_bytes`, in one call (one cached library to load, as :func:`tile_tables`):
    (group, source, destination, bytes) of the KV rows, dispatch and return matrices (the
    ones :func:`pair_bytes` finds from the placement alone)."""
    kv_group, kv_src, kv_dst, tokens = kv_fetches(
        group_ptr, group_ids, worker, groups, h_count, hold_ptr, hold_worker, hold_tokens)
    kv_bytes = tokens * kv_bytes_per_token
    dispatch = np.zeros(workers * workers)
    for i in range(kv_src.shape[0]):
        dispatch[kv_src[i] * workers + kv_dst[i]] += float(kv_bytes[i])
    dispatch, ret = tile_bytes(dispatch, worker, q_home, q_bytes, o_bytes, workers)
    return kv_group, kv_src, kv_dst, kv_bytes, dispatch, ret


def warm() -> None:
    """Load both kernels (numba's CPU target and the on-disk caches) with empty inputs of the
    very types the planner passes (int64 arrays, Python int and float scalars), so the
    caller can time or bracket that one-off cost (``tap.kernels``); computes nothing."""
    none, one = np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64)
    greedy(none, none, none, none, one, none, none, 1, one, none, none, 1, 1, 0.0)
    tile_tables(none, none, 1, none, none, 1, 1)
    exchange(one, none, none, 0, 1, one, none, none, 1, none, none, none, 1)
    worker_work(none, none, np.zeros(0), 1)
