"""Expected expert loads of a training MoE layer, from the routing model's popularity.

Training microbatches route about 10^5 tokens per GPU per layer, so a layer's expert loads
are close to their expectation; this module takes that expectation from the same router
model the MoE prefill simulation samples (:class:`~libra_des.workload.routing.RouterModel`):
per layer, each expert's chance per routed copy is the softmax of its popularity logits,
capped at one copy per token (top-k picks distinct experts) and renormalised to ``top_k``
copies per token. With the ``mixed`` dataset the loads are the mean over the datasets.

Assumption (ours): the token-level latent term of the router (``sharpness``) averages out
over a microbatch; it spreads tokens, not the expectation of the hot set, so leaving it out
errs on the side of less skew. Every replica sees the same expected loads, so the extra
cost a lockstep pool pays when its replicas' microbatches route differently (documents of
one request share their routing, ``request_share``) is not modelled: per-microbatch draws
would be needed for that.
"""

from __future__ import annotations

import numpy as np

from libra_des.config import ModelSpec, RoutingSpec
from libra_des.workload.routing import RouterModel, dataset_index


def expected_loads(model: ModelSpec, spec: RoutingSpec) -> np.ndarray:
    """``[layers, experts]`` expected routed copies per token (each row sums to top_k)."""
    router = RouterModel.build(model.name, model.experts, model.layers, model.top_k, spec)
    logits = router.bias.astype(np.float64)  # [datasets, layers, experts]
    p = np.exp(logits - logits.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    copies = capped_copies(p, model.top_k)
    index = dataset_index(spec.dataset)
    if index is None:  # ``mixed``: every dataset alike over a training run
        return np.asarray(copies.mean(axis=0))
    return np.asarray(copies[index])


def capped_copies(p: np.ndarray, k: int) -> np.ndarray:
    """``k * p`` with every entry capped at 1 and the excess spread over the uncapped ones
    in proportion to ``p`` (water filling; at most ``k`` rounds, each caps one more expert)."""
    copies = k * p
    for _ in range(k + 1):
        capped = copies >= 1.0
        left = k - capped.sum(axis=-1, keepdims=True)
        free = np.where(capped, 0.0, p)
        scale = left / np.maximum(free.sum(axis=-1, keepdims=True), 1e-300)
        copies = np.where(capped, 1.0, free * scale)
        if not np.any(copies > 1.0 + 1e-12):
            break
    return copies


def rank_loads(loads: np.ndarray, ep: int) -> np.ndarray:
    """``[layers, ep, experts/ep]``: experts placed contiguously on the EP ranks."""
    layers, experts = loads.shape
    return loads.reshape(layers, ep, experts // ep)

