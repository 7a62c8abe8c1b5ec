"""Expert predictors: which top-k experts will each token pick in a layer, before its gate runs.

* ``oracle``: the exact routing.
* ``lookahead`` (Libra): block i+1's gate applied to block i's hidden states. Modelled by its
  measured accuracy ``a`` (top-k agreement): each routed expert is kept with probability
  ``a``; a miss becomes the expert's substitute in that layer (see :class:`NoisyPredictor`),
  drawn by popularity (a gate applied to slightly stale states errs towards experts that are
  popular anyway). Per-layer accuracy defaults to a draw inside the paper's per-model range
  (docs/model.md B).
* ``lina``: an expert-selection-path table built from a profiling trace: for each layer, the
  co-occurrence counts of (expert at layer l-1, expert at layer l); a token's prediction is the
  top-k of the rows of its layer-(l-1) experts. Its accuracy is whatever the table achieves on
  the served trace (measured, not set).
* ``injected``: a given error rate, misses drawn from popular or uniformly random experts.

Accuracy is top-k agreement: ``|predicted ∩ routed| / k``, averaged over tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import numpy as np

from libra_des.errors import InputError
from libra_des.workload.agreement_kernel import topk_hits
from libra_des.workload.miss_kernel import fill_slots, mark_misses, set_words
from libra_des.workload.routing import CHUNK, RoutingTrace, stable_seed
from libra_des.workload.sampling import Scratch, thin_matmul, top_k_ascending

#: Lookahead accuracy ranges reported in the Libra MoE paper (docs/model.md B), by model family.
LOOKAHEAD_RANGES = {"qwen3": (0.865, 0.917), "glm": (0.727, 0.796)}
#: Rejection-sampling rounds for replacement experts before the exact fallback.
REJECTION_ROUNDS = 6


class Prediction(NamedTuple):
    """A predictor's ``[tokens, top_k]`` experts of one layer and their top-k agreement with
    the layer's routing (:func:`topk_agreement`, or the same number found another way)."""

    experts: np.ndarray
    agreement: float


class Predictor(Protocol):
    """Predicts ``[tokens, top_k]`` experts of ``layer`` for the tokens of ``trace``, and
    scores them against the routing."""

    @property
    def name(self) -> str: ...

    def predict(self, trace: RoutingTrace, layer: int, rng: np.random.Generator) -> Prediction:
        ...


def topk_agreement(predicted: np.ndarray, routed: np.ndarray) -> float:
    """Mean over tokens of ``|predicted ∩ routed| / k`` (rows hold distinct experts; the hits
    counted by ``agreement_kernel``)."""
    if routed.size == 0:
        return 1.0
    return int(topk_hits(predicted, routed)) / predicted.size


def model_family(model_name: str) -> str:
    """``qwen3`` or ``glm`` from a model name (unknown models use the Qwen3 range)."""
    return "glm" if model_name.lower().startswith("glm") else "qwen3"


@dataclass(frozen=True)
class Oracle:
    name: str = "oracle"

    def predict(self, trace: RoutingTrace, layer: int, rng: np.random.Generator) -> Prediction:
        return Prediction(trace.layer(layer), 1.0)


@dataclass(frozen=True)
class NoisyPredictor:
    """Keeps each routed expert with probability ``accuracy[layer]``; replaces the rest.

    Misses are systematic within a layer of a batch: the predictor confuses expert ``e`` with
    one substitute ``s(e)`` for every token (a stale hidden state shifts the gate's choice the
    same way), drawn by popularity (``popular``) or uniformly (``random``). So at low accuracy
    the predicted hot set itself is wrong, not just per-token noise that averages out.
    """

    name: str
    accuracy: np.ndarray  # [layers]
    error_bias: str = "popular"

    def predict(self, trace: RoutingTrace, layer: int, rng: np.random.Generator) -> Prediction:
        """The prediction and its top-k agreement with the routing. A replacement is never
        one of the row's routed experts while the row has experts outside it to spare (at
        least ``2 * top_k`` experts), so the hits are exactly the kept experts: the
        agreement is ``1 - misses / size`` without comparing rows (the same number
        :func:`topk_agreement` gives, as an integer count over the same size); with fewer
        experts the rows are compared."""
        routed = trace.layer(layer)
        counts = np.zeros(trace.num_experts, dtype=np.int64)
        miss = mark_misses(rng, routed, float(self.accuracy[layer]), counts)
        weights = counts + 1.0 if self.error_bias == "popular" else np.ones(counts.size)
        weights = weights / weights.sum()
        predicted = replace_misses(routed, miss, weights, rng, confusion(weights, rng))
        if trace.num_experts < 2 * trace.top_k:
            # A row may run out of experts outside it to replace its misses with: count.
            return Prediction(predicted, topk_agreement(predicted, routed))
        hits = miss.size - int(np.count_nonzero(miss))
        return Prediction(predicted, hits / miss.size if miss.size else 1.0)


def confusion(weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A substitute ``s(e) != e`` for every expert, drawn with probabilities ``weights``."""
    e = weights.size
    cdf = np.cumsum(weights)
    sub = np.minimum(np.searchsorted(cdf, rng.random(e) * cdf[-1]), e - 1)
    for _ in range(REJECTION_ROUNDS):
        same = np.flatnonzero(sub == np.arange(e))
        if same.size == 0:
            break
        sub[same] = np.minimum(np.searchsorted(cdf, rng.random(same.size) * cdf[-1]), e - 1)
    same = sub == np.arange(e)
    sub[same] = (np.arange(e)[same] + 1) % e
    result: np.ndarray = sub
    return result


def replace_misses(
    routed: np.ndarray,
    miss: np.ndarray,
    weights: np.ndarray,
    rng: np.random.Generator,
    substitute: np.ndarray | None = None,
) -> np.ndarray:
    """Replace ``routed[miss]`` by experts not in the row: ``substitute[e]`` when free, else
    a draw with probabilities ``weights``.

    Slot by slot so one row never repeats an expert; rejection sampling first, then an exact
    draw among the row's free experts for the few rows still colliding
    (``miss_kernel.fill_slots``).
    """
    out = routed.copy()
    given = np.zeros(0, dtype=np.int64) if substitute is None else substitute
    words = set_words(routed, -(-weights.size // 64))
    fill_slots(miss, routed, np.asarray(given, dtype=np.int64), weights, rng,
               REJECTION_ROUNDS, out, words)
    return out


@dataclass(frozen=True)
class PathTable:
    """Lina's expert-selection-path table: co-occurrence of experts in adjacent layers."""

    counts: np.ndarray  # [layers, experts, experts], counts[l, a, b]: a at l-1 and b at l
    first: np.ndarray  # [top_k] the profile's most popular experts of layer 0
    name: str = "lina"

    @classmethod
    def build(cls, profile: RoutingTrace) -> PathTable:
        e, k = profile.num_experts, profile.top_k
        counts = np.zeros((profile.layers, e, e), dtype=np.float32)
        for layer in range(1, profile.layers):
            prev = profile.layer(layer - 1).astype(np.int64)
            cur = profile.layer(layer).astype(np.int64)
            pairs = (prev[:, :, None] * e + cur[:, None, :]).ravel()
            counts[layer] = np.bincount(pairs, minlength=e * e).reshape(e, e)
        load0 = np.bincount(profile.layer(0).ravel(), minlength=e)
        first = np.argsort(-load0, kind="stable")[:k]
        return cls(counts, first)

    def predict(self, trace: RoutingTrace, layer: int, rng: np.random.Generator) -> Prediction:
        k, e = trace.top_k, trace.num_experts
        if layer == 0:
            first = np.broadcast_to(self.first, (trace.tokens, k)).copy()
            return Prediction(first, topk_agreement(first, trace.layer(0)))
        prev = trace.layer(layer - 1)
        out = np.empty((trace.tokens, k), dtype=np.int64)
        rows = min(CHUNK, trace.tokens)
        onehot = np.empty((rows, e), dtype=np.float32)
        scores = np.empty((rows, e), dtype=np.float32)
        scratch = Scratch.of(rows, e)
        # Chunks with reused buffers; the scores are sums of whole counts, exact in any order.
        for lo in range(0, trace.tokens, CHUNK):
            n = min(CHUNK, trace.tokens - lo)
            onehot[:n] = 0.0
            onehot[np.arange(n)[:, None], prev[lo : lo + n]] = 1.0
            thin_matmul(onehot[:n], self.counts[layer], scores[:n])
            out[lo : lo + n] = top_k_ascending(scores[:n], k, scratch.head(n))
        return Prediction(out, topk_agreement(out, trace.layer(layer)))


def layer_accuracy(model_name: str, layers: int, accuracy: float | None) -> np.ndarray:
    """Per-layer lookahead accuracy: the given value, or a fixed draw in the paper's range."""
    if accuracy is not None:
        return np.full(layers, accuracy)
    lo, hi = LOOKAHEAD_RANGES[model_family(model_name)]
    draw = np.random.default_rng(stable_seed(model_name, "lookahead")).random(layers)
    return np.asarray(lo + (hi - lo) * draw)


def build_oracle(_model: str, _layers: int, _accuracy: float | None, _bias: str,
                 _profile: RoutingTrace | None) -> Predictor:
    return Oracle()


def build_lookahead(model: str, layers: int, accuracy: float | None, bias: str,
                    _profile: RoutingTrace | None) -> Predictor:
    return NoisyPredictor("lookahead", layer_accuracy(model, layers, accuracy), bias)


def build_injected(_model: str, layers: int, accuracy: float | None, bias: str,
                   _profile: RoutingTrace | None) -> Predictor:
    if accuracy is None:
        raise InputError("balancer.accuracy", None, "1 - error rate in [0, 1] for injected")
    return NoisyPredictor("injected", np.full(layers, accuracy), bias)


def build_path_table(_model: str, _layers: int, _accuracy: float | None, _bias: str,
                     profile: RoutingTrace | None) -> Predictor:
    if profile is None:
        raise InputError("balancer.predictor", "lina", "lina needs a profiling trace")
    return PathTable.build(profile)


@dataclass(frozen=True)
class PredictorKind:
    """How a ``balancer.predictor`` is built and where it runs.

    ``on_cpu``: a host-side lookup off the GPU stream (Lina's path table) rather than a
    prediction kernel on the GPU; ``needs_profile``: it learns from a profiling trace.
    """

    build: Callable[[str, int, float | None, str, RoutingTrace | None], Predictor]
    on_cpu: bool = False
    needs_profile: bool = False


#: The predictors a scenario may name, by ``balancer.predictor`` value.
PREDICTORS: Mapping[str, PredictorKind] = {
    "oracle": PredictorKind(build_oracle),
    "lookahead": PredictorKind(build_lookahead),
    "lina": PredictorKind(build_path_table, on_cpu=True, needs_profile=True),
    "injected": PredictorKind(build_injected),
}


def predictor_kind(name: str) -> PredictorKind:
    """The predictor called ``name``; an unknown name is bad input."""
    if name not in PREDICTORS:
        raise InputError("balancer.predictor", name, " | ".join(PREDICTORS))
    return PREDICTORS[name]


def make_predictor(
    kind: str,
    model_name: str,
    layers: int,
    accuracy: float | None = None,
    error_bias: str = "popular",
    profile: RoutingTrace | None = None,
) -> Predictor:
    """Build a predictor by name (``balancer.predictor``)."""
    return predictor_kind(kind).build(model_name, layers, accuracy, error_bias, profile)
