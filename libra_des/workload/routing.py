"""MoE routing traces: a seeded top-k expert generator, and ``.npz`` trace files.

A :class:`RoutingTrace` holds, for every token of a prefill batch, the ``top_k`` expert ids it
is routed to in every MoE layer (``experts[tokens, layers, top_k]``, the layout of vLLM's
return-routed-experts option), plus the request and dataset each token belongs to.

Generator model (assumptions):

* Each expert has a popularity logit per layer and dataset: ``skew * SIGMA * z`` with
  ``z = sqrt(SHARED) * z_shared + sqrt(1 - SHARED) * z_dataset``; the shared part is common
  to every dataset (a model's intrinsically hot experts), the rest gives each dataset its own
  hot set. ``skew = 0`` is uniform routing.
* Each token carries a latent state (the residual stream, in ``LATENT_DIM`` dimensions) that
  follows an AR(1) process across layers with coefficient ``layer_correlation``; part of it
  (``request_share``) is shared by the tokens of one request (its topic). The router scores
  ``popularity + sharpness * state @ gate_l + Gumbel`` and keeps the top-k (Gumbel-top-k is
  sampling without replacement from the softmax of the logits). Gate directions of adjacent
  layers are correlated along a fixed expert permutation (:func:`path_gates`), so the same
  ``layer_correlation`` makes a token's experts in layer l+1 predictable from layer l.
* Logits and gate weights are model properties: they come from a generator seeded by a stable
  hash of the model and dataset names, not from the run's seed, so a profiling sample and a
  served batch see the same hot experts. Only token sampling uses the caller's generator.
* The ``mixed`` stream visits the datasets in order: request ``i`` of ``n`` draws its dataset
  from weights centred on dataset ``8 i / n``, so the mix drifts over time.
* A token's ``top_k`` experts are stored in ascending order of their perturbed scores (the
  first expert drawn last). The draws are sequential sampling without replacement, which
  has Gumbel-top-k's law (:mod:`libra_des.workload.uniform_kernel`); tests/test_routing_law.py
  checks the law statistically, not one particular random stream.
"""

from __future__ import annotations

import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from libra_des.base.kernel import Ints
from libra_des.config import MOE_DATASETS, RoutingSpec
from libra_des.errors import InputError
from libra_des.workload.uniform_kernel import ar1_mix, route_tokens, token_latents

#: Latent state dimensions (small: it only needs to carry correlation, not semantics).
LATENT_DIM = 8
#: Popularity-logit scale at ``skew = 1``; chosen so the GPU imbalance of static placement
#: spans the paper's 1.5-2.7 across layers (measured in tests/test_routing.py).
SIGMA = 2.5
#: Share of popularity-logit variance common to all datasets.
SHARED = 0.3
#: Width (in datasets) of the ``mixed`` stream's window over the dataset sequence.
MIX_WIDTH = 0.8
#: Tokens scored at once by the predictors (a [chunk, experts] block stays in cache).
CHUNK = 2048
TRACE_FIELD = "workload.routing.trace"


def stable_seed(*names: str) -> list[int]:
    """A seed from names that does not change between runs (``hash()`` would)."""
    return [zlib.crc32(n.encode()) for n in names]


@dataclass(frozen=True)
class RoutingTrace:
    """Routed experts of one batch of tokens (all MoE layers).

    ``experts`` reads ``[tokens, layers, top_k]``; generated and cached traces keep it as a
    view of layer-major storage (:meth:`of_layers`), so each layer is one contiguous block,
    as the generator writes it and the run reads it.
    """

    experts: np.ndarray  # [tokens, layers, top_k] int
    request: np.ndarray  # [tokens] request index inside the batch (0..requests-1)
    dataset: np.ndarray  # [tokens] index into MOE_DATASETS, -1 when unknown
    num_experts: int

    @classmethod
    def of_layers(cls, by_layer: np.ndarray, request: np.ndarray, dataset: np.ndarray,
                  num_experts: int) -> RoutingTrace:
        """A trace whose experts are stored layer-major (``[layers, tokens, top_k]``)."""
        return cls(by_layer.transpose(1, 0, 2), request, dataset, num_experts)

    @property
    def by_layer(self) -> np.ndarray:
        """``[layers, tokens, top_k]`` experts, C-contiguous (a view where the trace is stored
        layer-major, else a copy)."""
        return np.ascontiguousarray(self.experts.transpose(1, 0, 2))

    @property
    def tokens(self) -> int:
        return int(self.experts.shape[0])

    @property
    def layers(self) -> int:
        return int(self.experts.shape[1])

    @property
    def top_k(self) -> int:
        return int(self.experts.shape[2])

    @property
    def requests(self) -> int:
        return int(self.request.max()) + 1 if self.tokens else 0

    def layer(self, index: int) -> np.ndarray:
        """``[tokens, top_k]`` expert ids of one layer."""
        return self.experts[:, index, :]

    def expert_load(self) -> np.ndarray:
        """``[layers, experts]`` token count per expert (the EPLB weight)."""
        layers, e = self.layers, self.num_experts
        flat = self.by_layer.reshape(layers, -1).astype(np.int64)
        flat = flat + (np.arange(layers) * e)[:, None]
        return np.bincount(flat.ravel(), minlength=layers * e).reshape(layers, e)

    def request_lengths(self) -> np.ndarray:
        """Tokens per request (the prefill documents of attention)."""
        return np.bincount(self.request, minlength=self.requests)


@dataclass(frozen=True)
class RouterModel:
    """The model-side part of the generator (fixed per model, independent of the run seed)."""

    bias: np.ndarray  # [datasets, layers, experts] popularity logits
    gate: np.ndarray  # [layers, LATENT_DIM, experts] latent-to-logit weights
    top_k: int
    layer_correlation: float
    request_share: float
    sharpness: float

    @classmethod
    def build(
        cls, model_name: str, experts: int, layers: int, top_k: int, spec: RoutingSpec
    ) -> RouterModel:
        shared = np.random.default_rng(stable_seed(model_name, "shared"))
        z_shared = shared.standard_normal((layers, experts))
        gate = path_gates(shared, layers, experts, spec.layer_correlation)
        bias = np.empty((len(MOE_DATASETS), layers, experts))
        for d, name in enumerate(MOE_DATASETS):
            own = np.random.default_rng(stable_seed(model_name, name)).standard_normal(
                (layers, experts)
            )
            z = np.sqrt(SHARED) * z_shared + np.sqrt(1.0 - SHARED) * own
            bias[d] = spec.skew * SIGMA * z
        return cls(
            bias=bias.astype(np.float32),
            gate=gate.astype(np.float32),
            top_k=top_k,
            layer_correlation=spec.layer_correlation,
            request_share=spec.request_share,
            sharpness=spec.sharpness,
        )


def path_gates(
    rng: np.random.Generator, layers: int, experts: int, correlation: float
) -> np.ndarray:
    """``[layers, LATENT_DIM, experts]`` gate directions with expert-selection paths.

    Layer ``l + 1``'s expert ``perm_l[e]`` points where layer ``l``'s expert ``e`` did, with
    correlation ``correlation``: a token that picked ``e`` tends to pick ``perm_l[e]`` next
    (the paths Lina's table records; expert ids are arbitrary, hence the permutation).
    """
    gate = np.empty((layers, LATENT_DIM, experts))
    gate[0] = rng.standard_normal((LATENT_DIM, experts))
    fresh = np.sqrt(1.0 - correlation**2)
    for layer in range(1, layers):
        perm = rng.permutation(experts)
        carried = np.empty((LATENT_DIM, experts))
        carried[:, perm] = gate[layer - 1]
        gate[layer] = correlation * carried + fresh * rng.standard_normal((LATENT_DIM, experts))
    return np.asarray(gate / np.sqrt(LATENT_DIM))


def dataset_index(name: str) -> int | None:
    """Index of a named dataset, ``None`` for ``mixed``."""
    key = name.lower()
    if key == "mixed":
        return None
    if key not in MOE_DATASETS:
        raise InputError("workload.routing.dataset", name, " | ".join((*MOE_DATASETS, "mixed")))
    return MOE_DATASETS.index(key)


def mix_weights(position: np.ndarray) -> np.ndarray:
    """``[n, datasets]`` mixture weights of the ``mixed`` stream at positions in [0, 1)."""
    centres = np.arange(len(MOE_DATASETS)) + 0.5
    x = np.asarray(position)[:, None] * len(MOE_DATASETS)
    w = np.exp(-0.5 * ((x - centres) / MIX_WIDTH) ** 2)
    return np.asarray(w / w.sum(axis=1, keepdims=True))


def request_datasets(
    name: str, requests: int, start: int, stream: int, rng: np.random.Generator
) -> np.ndarray:
    """Dataset index of each request ``start .. start+requests-1`` of a stream of ``stream``."""
    fixed = dataset_index(name)
    if fixed is not None:
        return np.full(requests, fixed, dtype=np.int16)
    position = (start + np.arange(requests) + 0.5) / max(stream, 1)
    cdf = np.cumsum(mix_weights(position), axis=1)
    u = rng.random(requests)[:, None]
    picks: Ints = (u > cdf).sum(axis=1)
    return np.minimum(picks, len(MOE_DATASETS) - 1).astype(np.int16)


def ar1_update(state: np.ndarray, rho: float, rng: np.random.Generator) -> None:
    """One AR(1) step of C-contiguous float32 ``state`` in place, with unit stationary
    variance: fresh float64 normals, the mix (``uniform_kernel.ar1_mix``) formed in float64
    and rounded once to float32."""
    ar1_mix(rng, state.reshape(-1), float(np.sqrt(1.0 - rho * rho)), np.float32(rho))


def ar1_step(state: np.ndarray, rho: float, rng: np.random.Generator) -> np.ndarray:
    """One AR(1) step with unit stationary variance (a new float32 array)."""
    out = np.array(state, dtype=np.float32)
    ar1_update(out, rho, rng)
    return out


@dataclass(frozen=True)
class LatentState:
    """Request and token latent states of one layer, stepped in place to the next."""

    req: np.ndarray  # [requests, LATENT_DIM] float32
    tok: np.ndarray  # [tokens, LATENT_DIM] float32

    def step(self, rho: float, rng: np.random.Generator) -> None:
        """Both states one AR(1) step on (request states first)."""
        for state in (self.req, self.tok):
            ar1_update(state, rho, rng)


@dataclass(frozen=True)
class TokenLatents:
    """The AR(1) residual-stream model of a batch's tokens (see the module doc)."""

    requests: int
    request: np.ndarray  # [tokens] request of every token
    weights: tuple[np.float32, np.float32]  # std-dev weights of the request and token parts
    rho: float

    @classmethod
    def of(cls, router: RouterModel, request_lengths: np.ndarray) -> TokenLatents:
        lengths = np.asarray(request_lengths, dtype=np.int64)
        request = np.repeat(np.arange(lengths.size, dtype=np.int32), lengths)
        share = router.request_share
        weights = (np.float32(np.sqrt(share)), np.float32(np.sqrt(1.0 - share)))
        return cls(lengths.size, request, weights, router.layer_correlation)

    def initial(self, rng: np.random.Generator) -> LatentState:
        req = rng.standard_normal((self.requests, LATENT_DIM), dtype=np.float32)
        tok = rng.standard_normal((self.request.size, LATENT_DIM), dtype=np.float32)
        return LatentState(req, tok)

    def mix(self, state: LatentState) -> np.ndarray:
        """``[tokens, LATENT_DIM]`` latent of every token (request part + own part), in one
        pass (``uniform_kernel.token_latents``)."""
        w_req, w_tok = self.weights
        out = np.empty_like(state.tok)
        token_latents(state.req, state.tok, self.request, w_req, w_tok, out)
        return out


def generate_trace(
    router: RouterModel,
    request_lengths: np.ndarray,
    datasets: np.ndarray,
    rng: np.random.Generator,
) -> RoutingTrace:
    """Sample the routed experts of one batch (requests of the given lengths and datasets).

    Per layer, ``rng`` gives the latent step's normals, then ``[tokens, top_k]`` float64
    uniforms that ``uniform_kernel.route_tokens`` turns into sequential draws without
    replacement (Gumbel-top-k's law, see the module doc).
    """
    latents = TokenLatents.of(router, request_lengths)
    request, tokens = latents.request, latents.request.size
    tok_dataset = np.asarray(datasets, dtype=np.int16)[request]
    state = latents.initial(rng)
    layers, _, num_experts = router.gate.shape
    dtype = np.int16 if num_experts <= np.iinfo(np.int16).max else np.int32
    # Layer-major (RoutingTrace.of_layers): token-major, a layer's few bytes per token would
    # land on a cache line of their own.
    by_layer = np.empty((layers, tokens, router.top_k), dtype=dtype)
    uniforms = np.empty((tokens, router.top_k))
    for layer in range(layers):
        if layer:
            state.step(latents.rho, rng)
        gate = np.float32(router.sharpness) * router.gate[layer]
        bias = np.ascontiguousarray(router.bias[:, layer])
        rng.random(out=uniforms)
        route_tokens(latents.mix(state), gate, bias, tok_dataset, uniforms, by_layer[layer])
    return RoutingTrace.of_layers(by_layer, request, tok_dataset, num_experts)


# ----------------------------------------------------------------------------- files


def save_trace(path: str | Path, trace: RoutingTrace) -> None:
    """Write a trace as ``.npz`` (``experts`` [tokens, layers, top_k], ``request``, ``dataset``)."""
    np.savez_compressed(
        Path(path), experts=trace.experts, request=trace.request, dataset=trace.dataset
    )


def read_npz(path: str | Path) -> dict[str, np.ndarray]:
    """All arrays of an ``.npz`` file; unreadable or malformed files are input errors."""
    try:
        data = np.load(Path(path), allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):  # a bare .npy array, not an archive
            return {}
        with data:
            return {key: np.asarray(data[key]) for key in data.files}
    except FileNotFoundError:
        raise InputError(TRACE_FIELD, str(path), "an existing .npz file") from None
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise InputError(
            TRACE_FIELD, str(path), f"a readable .npz file ({exc.__class__.__name__})"
        ) from None


def load_trace(
    path: str | Path, num_experts: int, layers: int, top_k: int, seq_len: int
) -> RoutingTrace:
    """Load and validate a real trace; tokens without request ids form ``seq_len`` requests."""
    arrays = read_npz(path)
    if not arrays:
        raise InputError(TRACE_FIELD, str(path), "an .npz archive holding 'experts' (not .npy)")
    experts = arrays.get("experts")
    if experts is None:
        raise InputError(TRACE_FIELD, str(path), "an .npz holding an 'experts' array")
    check_experts(str(path), experts, num_experts, layers, top_k)
    tokens = experts.shape[0]
    request = arrays.get("request")
    if request is None:
        request = np.arange(tokens, dtype=np.int32) // seq_len
    if request.shape != (tokens,) or not np.issubdtype(request.dtype, np.integer):
        raise InputError(TRACE_FIELD, str(path), "'request' as an int array [tokens]")
    if tokens and (request.min() < 0 or np.any(np.diff(request) < 0)):
        raise InputError(TRACE_FIELD, str(path), "'request' ids >= 0 in non-decreasing order")
    dataset = arrays.get("dataset")
    if dataset is None or dataset.shape != (tokens,):
        dataset = np.full(tokens, -1, dtype=np.int16)
    _, dense_request = np.unique(request, return_inverse=True)
    by_layer = np.ascontiguousarray(experts.transpose(1, 0, 2), dtype=np.int32)
    return RoutingTrace.of_layers(by_layer, dense_request.astype(np.int32), dataset, num_experts)


def check_experts(name: str, experts: np.ndarray, num_experts: int, layers: int, k: int) -> None:
    """The ``[tokens, layers, top_k]`` int layout with ids in range and no repeats per row."""
    want = f"an int array [tokens, {layers}, {k}] of expert ids in [0, {num_experts})"
    if experts.ndim != 3 or not np.issubdtype(experts.dtype, np.integer):
        raise InputError(TRACE_FIELD, name, want)
    if experts.shape[1:] != (layers, k) or experts.shape[0] == 0:
        raise InputError(TRACE_FIELD, name, f"{want}; got shape {experts.shape}")
    if experts.min() < 0 or experts.max() >= num_experts:
        raise InputError(TRACE_FIELD, name, f"{want}; ids out of range")
    if repeats_in_rows(experts):
        raise InputError(TRACE_FIELD, name, f"{want}; distinct experts per token and layer")


#: Widest rows checked pair by pair in :func:`repeats_in_rows` (wider ones are sorted).
PAIRWISE_TOP_K = 16


def repeats_in_rows(ids: np.ndarray) -> bool:
    """Whether some row along the last axis repeats an id. Compares each pair of columns
    (k(k-1)/2 elementwise passes, about 5x faster than sorting millions of 8-wide rows)."""
    k = ids.shape[-1]
    if k > PAIRWISE_TOP_K:
        ordered = np.sort(ids, axis=-1)
        return bool(np.any(ordered[..., 1:] == ordered[..., :-1]))
    return any(bool(np.any(ids[..., a] == ids[..., b]))
               for a in range(k) for b in range(a + 1, k))
