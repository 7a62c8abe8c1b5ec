"""EPLB: DeepSeek's expert-parallel load balancer (static replication), written from its
published description (docs/model.md B), in numpy.

Hierarchical policy (used when expert groups divide evenly over nodes):

1. pack expert groups onto nodes so node loads balance, every node getting the same number
   of groups (``balanced_packing``: heaviest item first, into the lightest pack that is not
   yet full);
2. inside each node, add replicas one at a time to the logical expert with the largest load
   per replica until the node's physical slots are full (``replicate``);
3. pack the node's physical experts (each carrying load / replica count) onto its GPUs, every
   GPU getting exactly its share of slots.

Global policy: the same with one group and one node. Ties go to the lower index (stable).
"""

from __future__ import annotations

import numpy as np


def balanced_packing(weight: np.ndarray, num_packs: int) -> tuple[np.ndarray, np.ndarray]:
    """Pack ``items`` per row into ``num_packs`` packs of exactly ``items / num_packs`` each.

    Returns ``(pack, rank)``: the pack of every item and its position inside the pack.
    """
    rows, items = weight.shape
    if items % num_packs:
        raise ValueError(f"{items} items do not split evenly into {num_packs} packs")
    per_pack = items // num_packs
    if per_pack == 1:
        # One item per pack: any assignment is equally balanced; keep the identity layout.
        return np.tile(np.arange(items), (rows, 1)), np.zeros((rows, items), dtype=np.int64)
    pack = np.empty((rows, items), dtype=np.int64)
    rank = np.empty((rows, items), dtype=np.int64)
    for r in range(rows):
        load = np.zeros(num_packs)
        count = np.zeros(num_packs, dtype=np.int64)
        for item in np.argsort(-weight[r], kind="stable"):
            open_packs = np.flatnonzero(count < per_pack)
            p = open_packs[np.argmin(load[open_packs])]
            pack[r, item], rank[r, item] = p, count[p]
            load[p] += weight[r, item]
            count[p] += 1
    return pack, rank


def replicate(weight: np.ndarray, num_physical: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Give the hottest expert per replica one more replica until ``num_physical`` slots.

    Returns ``(phy2log, rank, logcnt)``: the logical expert of every physical slot, the
    replica index of that slot, and the replica count of every logical expert.
    """
    rows, logical = weight.shape
    phy2log = np.empty((rows, num_physical), dtype=np.int64)
    rank = np.zeros((rows, num_physical), dtype=np.int64)
    phy2log[:, :logical] = np.arange(logical)
    logcnt = np.ones((rows, logical), dtype=np.int64)
    every = np.arange(rows)
    for slot in range(logical, num_physical):
        best = np.argmax(weight / logcnt, axis=1)
        phy2log[:, slot] = best
        rank[:, slot] = logcnt[every, best]
        logcnt[every, best] += 1
    return phy2log, rank, logcnt


def inverse(perm: np.ndarray) -> np.ndarray:
    """Row-wise inverse of permutations."""
    out = np.empty_like(perm)
    np.put_along_axis(out, perm, np.broadcast_to(np.arange(perm.shape[1]), perm.shape), axis=1)
    return out


def rebalance_hierarchical(
    weight: np.ndarray, num_physical: int, num_groups: int, num_nodes: int, num_gpus: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Groups to nodes, replicas inside nodes, replicas to GPUs. Returns phy2log, rank, logcnt."""
    layers, logical = weight.shape
    group_size = logical // num_groups
    log_per_node, phy_per_node = logical // num_nodes, num_physical // num_nodes
    phy_per_gpu, gpus_per_node = num_physical // num_gpus, num_gpus // num_nodes
    # 1. groups -> nodes; "mlog" numbers logical experts node-major after this packing.
    group_pack, group_rank = balanced_packing(
        weight.reshape(layers, num_groups, group_size).sum(-1), num_nodes
    )
    first = (group_pack * (num_groups // num_nodes) + group_rank) * group_size
    log2mlog = (first[:, :, None] + np.arange(group_size)).reshape(layers, logical)
    mlog2log = inverse(log2mlog)
    # 2. replicate inside each node (rows become (layer, node) pairs).
    node_weight = np.take_along_axis(weight, mlog2log, axis=1).reshape(-1, log_per_node)
    phy2mlog, phy_rank, mlogcnt = replicate(node_weight, phy_per_node)
    # 3. pack each node's physical experts onto its GPUs.
    per_replica = np.take_along_axis(node_weight / mlogcnt, phy2mlog, axis=1)
    gpu_pack, gpu_rank = balanced_packing(per_replica, gpus_per_node)
    pphy2phy = inverse(gpu_pack * phy_per_gpu + gpu_rank)
    pphy2mlog = np.take_along_axis(phy2mlog, pphy2phy, axis=1).reshape(layers, num_nodes, -1)
    pphy2mlog = (pphy2mlog + (np.arange(num_nodes) * log_per_node)[None, :, None]).reshape(
        layers, -1
    )
    phy2log = np.take_along_axis(mlog2log, pphy2mlog, axis=1)
    rank = np.take_along_axis(phy_rank, pphy2phy, axis=1).reshape(layers, -1)
    logcnt = np.take_along_axis(mlogcnt.reshape(layers, -1), log2mlog, axis=1)
    return phy2log, rank, logcnt


def rebalance_experts(
    weight: np.ndarray, num_replicas: int, num_groups: int, num_nodes: int, num_gpus: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """EPLB entry point: ``weight[layers, experts]`` load -> ``(phy2log, log2phy, logcnt)``.

    ``phy2log[l, p]``: logical expert in physical slot ``p`` (GPU ``p // (num_replicas /
    num_gpus)``); ``log2phy[l, e, r]``: physical slot of replica ``r`` of expert ``e`` (-1
    padded); ``logcnt[l, e]``: replicas of expert ``e``.
    """
    w = np.asarray(weight, dtype=np.float64)
    layers, logical = w.shape
    if num_replicas < logical or num_replicas % num_gpus or num_gpus % num_nodes:
        raise ValueError("need num_replicas >= experts, num_gpus | num_replicas, nodes | gpus")
    if logical % num_groups:
        raise ValueError("num_groups must divide the number of experts")
    if num_groups % num_nodes == 0:
        phy2log, rank, logcnt = rebalance_hierarchical(
            w, num_replicas, num_groups, num_nodes, num_gpus
        )
    else:
        phy2log, rank, logcnt = rebalance_hierarchical(w, num_replicas, 1, 1, num_gpus)
    log2phy = np.full((layers, logical, int(logcnt.max())), -1, dtype=np.int64)
    rows = np.broadcast_to(np.arange(layers)[:, None], phy2log.shape)
    log2phy[rows, phy2log, rank] = np.broadcast_to(np.arange(num_replicas), phy2log.shape)
    return phy2log, log2phy, logcnt
