"""How much longer an all-to-all's flows run than their bytes at the flow's fair rate, so
that the flow model rates them as the fast model does (received bytes stay the real ones;
the flows carry more).

* Across nodes: one over the NIC's incast share (:mod:`libra_des.hardware.collectives.a2a_incast`),
  as the fast model applies it for the group's layout (``fan_in_share``; None: the law
  itself), or none for exchanges that do not fan in as NCCL's does (DeepEP's kernels).
* Inside a node: the NVLink port rate over the p2p rate an NCCL exchange reaches there
  (``p2p_rate``: NCCL's p2p channels on the datasheet tier), at least 1.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from libra_des.hardware.collectives.a2a_incast import incast_share


def all_to_all_stretch(node: np.ndarray, port: float, p2p_rate: Callable[[int], float] | None,
                       fan_in_share: Callable[[int, int], float] | None,
                       fan_in: bool) -> np.ndarray | None:
    """``[n, n]`` stretch of each pair's flow for ranks on nodes ``node[n]``; None where
    every factor is 1."""
    nodes, per_node = np.unique(node, return_counts=True)
    gpn = int(per_node.max())
    inside = max(port / p2p_rate(gpn), 1.0) if p2p_rate is not None and gpn > 1 else 1.0
    across = 1.0
    if nodes.size > 1 and fan_in:
        share = incast_share(nodes.size) if fan_in_share is None else fan_in_share(node.size, gpn)
        across = 1.0 / share
    if across <= 1.0 and inside <= 1.0:
        return None
    return np.where(node[:, None] != node[None, :], across, inside)
