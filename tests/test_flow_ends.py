"""The indexed heaps of flow ends against a plain dictionary of keys."""

from __future__ import annotations

import numpy as np

from libra_des.sim.network.flow import flow_ends


def test_pushes_rekeys_and_removals_keep_the_smallest_key_on_top() -> None:
    rng = np.random.default_rng(1)
    slots = 40
    key, slot = np.zeros((2, slots)), np.zeros((2, slots), dtype=np.int64)
    pos = np.full((2, slots), -1, dtype=np.int64)
    want: dict[int, float] = {}
    size = 0
    for _ in range(3000):
        op = int(rng.integers(3))
        if op == 0 and want:
            s = int(rng.choice(list(want)))
            want[s] = float(rng.choice([rng.random(), np.inf, want[s]]))
            flow_ends.rekey(key, slot, pos, 1, size, s, want[s])
        elif op == 1 and want:
            s = int(rng.choice(list(want)))
            size = flow_ends.remove(key, slot, pos, 1, size, s)
            del want[s]
            assert pos[1, s] == -1
        elif len(want) < slots:
            s = min(set(range(slots)) - set(want))
            want[s] = float(rng.random())
            size = flow_ends.push(key, slot, pos, 1, size, s, want[s])
        assert size == len(want)
        if want:
            assert key[1, 0] == min(want.values())
        assert all(pos[1, slot[1, i]] == i and key[1, i] == want[slot[1, i]] for i in range(size))
    assert (pos[0] == -1).all()  # the other heap untouched


def test_build_orders_entries_written_in_place() -> None:
    rng = np.random.default_rng(2)
    n = 33
    key, slot = np.zeros((2, n)), np.zeros((2, n), dtype=np.int64)
    pos = np.zeros((2, n), dtype=np.int64)
    key[0], slot[0] = rng.random(n), rng.permutation(n)
    flow_ends.build(key, slot, pos, 0, n)
    for i in range(1, n):
        assert key[0, (i - 1) // 2] <= key[0, i]
    assert (pos[0, slot[0]] == np.arange(n)).all()
