"""Indexed binary heaps of flow end times, for :func:`~libra_des.sim.network.flow.fluid_kernel.run`.

Heap ``h`` is row ``h`` of three arrays: ``key[h, i]`` and ``slot[h, i]`` at heap position
``i``, and ``pos[h, s]``, flow slot ``s``'s position. The smallest key is at position 0. A
flow's key is changed in place (sifted up or down), so a heap never holds stale entries:
its size is the number of flows in it. Ties keep whichever entry got there first; the
kernel sorts the flows it takes by their place in the active list, so ties do not leak
into results.
"""

from __future__ import annotations

from libra_des.base.kernel import Floats, Ints, kernel


@kernel
def _place(key: Floats, slot: Ints, pos: Ints, h: int, i: int, k: float,
           s: int) -> None:
    key[h, i] = k
    slot[h, i] = s
    pos[h, s] = i


@kernel
def sift_up(key: Floats, slot: Ints, pos: Ints, h: int, i: int) -> int:
    """Move the entry at ``i`` up to its place; returns where it ended."""
    k, s = key[h, i], slot[h, i]
    while i > 0:
        parent = (i - 1) >> 1
        if key[h, parent] <= k:
            break
        _place(key, slot, pos, h, i, key[h, parent], slot[h, parent])
        i = parent
    _place(key, slot, pos, h, i, k, s)
    return i


@kernel
def sift_down(key: Floats, slot: Ints, pos: Ints, h: int, i: int,
              n: int) -> None:
    """Move the entry at ``i`` down to its place in a heap of ``n`` entries."""
    k, s = key[h, i], slot[h, i]
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and key[h, c + 1] < key[h, c]:
            c += 1
        if key[h, c] >= k:
            break
        _place(key, slot, pos, h, i, key[h, c], slot[h, c])
        i = c
    _place(key, slot, pos, h, i, k, s)


@kernel
def build(key: Floats, slot: Ints, pos: Ints, h: int, n: int) -> None:
    """Make heap ``h`` of the ``n`` entries already written at positions 0..n-1."""
    for i in range(n):
        pos[h, slot[h, i]] = i
    for i in range(n // 2 - 1, -1, -1):
        sift_down(key, slot, pos, h, i, n)


@kernel
def rekey(key: Floats, slot: Ints, pos: Ints, h: int, n: int, s: int,
          k: float) -> None:
    """Give flow ``s`` (in heap ``h`` of ``n`` entries) the key ``k``."""
    i = pos[h, s]
    old = key[h, i]
    key[h, i] = k
    if k < old:
        sift_up(key, slot, pos, h, i)
    else:
        sift_down(key, slot, pos, h, i, n)


@kernel
def push(key: Floats, slot: Ints, pos: Ints, h: int, n: int, s: int,
         k: float) -> int:
    """Add flow ``s`` with key ``k`` to heap ``h`` of ``n`` entries; returns the new size."""
    _place(key, slot, pos, h, n, k, s)
    sift_up(key, slot, pos, h, n)
    return n + 1


@kernel
def remove(key: Floats, slot: Ints, pos: Ints, h: int, n: int,
           s: int) -> int:
    """Take flow ``s`` out of heap ``h`` of ``n`` entries; returns the new size."""
    i = pos[h, s]
    pos[h, s] = -1
    n -= 1
    if i == n:
        return n
    _place(key, slot, pos, h, i, key[h, n], slot[h, n])
    if sift_up(key, slot, pos, h, i) == i:
        sift_down(key, slot, pos, h, i, n)
    return n
