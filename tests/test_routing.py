"""Routing traces: generator statistics, predictors, and .npz files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from libra_des.config import MOE_DATASETS, RoutingSpec, load_scenario
from libra_des.errors import InputError
from libra_des.plan.moe import static_home
from libra_des.workload.predictors import (
    LOOKAHEAD_RANGES,
    PathTable,
    make_predictor,
    topk_agreement,
)
from libra_des.workload.routing import (
    RouterModel,
    RoutingTrace,
    generate_trace,
    load_trace,
    mix_weights,
    repeats_in_rows,
    request_datasets,
    save_trace,
)

E, K, G = 128, 8, 8


def trace(
    dataset: str = "fineweb", layers: int = 6, requests: int = 8, seq: int = 512, seed: int = 0,
    **spec: float,
) -> RoutingTrace:
    router = RouterModel.build("qwen3-235b-a22b", E, layers, K, RoutingSpec(dataset=dataset,
                                                                           **spec))
    rng = np.random.default_rng(seed)
    datasets = request_datasets(dataset, requests, 0, requests, rng)
    return generate_trace(router, np.full(requests, seq), datasets, rng)


def static_imbalance(t: RoutingTrace) -> np.ndarray:
    """Per-layer max/mean GPU load under contiguous static placement."""
    gpu = static_home(E, G).argmax(axis=0)
    loads = np.stack([np.bincount(gpu[t.layer(i).ravel()], minlength=G) for i in range(t.layers)])
    return np.asarray(loads.max(axis=1) / loads.mean(axis=1))


def test_layout_and_determinism() -> None:
    a, b, c = trace(seed=1), trace(seed=1), trace(seed=2)
    assert a.experts.shape == (8 * 512, 6, K)
    assert a.experts.min() >= 0 and a.experts.max() < E
    ordered = np.sort(a.experts, axis=2)
    assert not np.any(ordered[:, :, 1:] == ordered[:, :, :-1]), "repeated expert in a row"
    assert np.array_equal(a.experts, b.experts)
    assert not np.array_equal(a.experts, c.experts)
    assert np.array_equal(a.request_lengths(), np.full(8, 512))


def test_skew_spans_the_imbalance_range() -> None:
    flat = static_imbalance(trace(skew=0.0, layers=8))
    paper = static_imbalance(trace(skew=1.0, layers=8))
    heavy = static_imbalance(trace(skew=3.0, layers=8))
    assert flat.mean() < 1.25
    assert 1.4 < paper.mean() < 2.2 and paper.max() < 3.0
    # Over seeds 0-5 heavy's mean is 1.97-2.04 against paper's 1.67-1.80, and its largest
    # layer 2.29-2.53: a margin on the mean, a floor on the max, both far from either edge.
    assert heavy.mean() > paper.mean() + 0.15 and heavy.max() > 2.2


def test_datasets_have_distinct_hot_experts() -> None:
    hot = {}
    for name in ("gsm8k", "codeforces", "bookcorpus"):
        load = trace(name, layers=2).expert_load()[0]
        hot[name] = set(np.argsort(-load)[:8].tolist())
    assert len(hot["gsm8k"] & hot["codeforces"]) <= 5
    assert len(hot["gsm8k"] & hot["bookcorpus"]) <= 5


def test_mixed_stream_drifts_over_time() -> None:
    w = mix_weights(np.array([0.02, 0.98]))
    assert w[0].argmax() == 0 and w[1].argmax() == len(MOE_DATASETS) - 1
    rng = np.random.default_rng(0)
    early = request_datasets("mixed", 200, 0, 2000, rng)
    late = request_datasets("mixed", 200, 1800, 2000, rng)
    assert early.mean() < 1.5 and late.mean() > 5.5


def path_lift(t: RoutingTrace) -> float:
    """Mean over experts a of max_b P(b at l+1 | a at l) / P(b at l+1)."""
    lifts = []
    for layer in range(t.layers - 1):
        prev, cur = t.layer(layer).astype(np.int64), t.layer(layer + 1).astype(np.int64)
        pairs = np.bincount((prev[:, :, None] * E + cur[:, None, :]).ravel(), minlength=E * E)
        joint = pairs.reshape(E, E) / pairs.sum()
        p_a, p_b = joint.sum(axis=1), joint.sum(axis=0)
        seen = p_a > 1e-3
        lift = joint[seen] / (p_a[seen, None] * np.maximum(p_b[None, :], 1e-12))
        lifts.append(np.where(p_b[None, :] > 1e-3, lift, 0).max(axis=1).mean())
    return float(np.mean(lifts))


def test_adjacent_layers_are_correlated() -> None:
    free = path_lift(trace(layer_correlation=0.0, requests=8, seq=1024))
    linked = path_lift(trace(layer_correlation=0.95, requests=8, seq=1024))
    assert linked > free + 0.3


def test_predictor_accuracy_is_top_k_agreement() -> None:
    t = trace(layers=3)
    rng = np.random.default_rng(0)
    assert make_predictor("oracle", "qwen3", 3).predict(t, 1, rng).agreement == 1.0
    assert topk_agreement(t.layer(1), t.layer(1)) == 1.0
    for a in (0.9, 0.5, 0.1):
        pred = make_predictor("lookahead", "qwen3", 3, accuracy=a).predict(t, 1, rng).experts
        assert abs(topk_agreement(pred, t.layer(1)) - a) < 0.01
        ordered = np.sort(pred, axis=1)
        assert not np.any(ordered[:, 1:] == ordered[:, :-1])


def test_noisy_predictor_scores_itself_as_top_k_agreement() -> None:
    # Its agreement comes from its own misses; the rows it returns must give the same number.
    t = trace(layers=2, skew=2.0)
    for kind, a, bias in (("lookahead", 0.9, "popular"), ("injected", 0.3, "random"),
                          ("injected", 0.0, "popular"), ("lookahead", 1.0, "random")):
        predictor = make_predictor(kind, "qwen3", 2, accuracy=a, error_bias=bias)
        pred, agreement = predictor.predict(t, 1, np.random.default_rng(3))
        assert agreement == topk_agreement(pred, t.layer(1))
    oracle = make_predictor("oracle", "qwen3", 2)
    assert oracle.predict(t, 0, np.random.default_rng(0)).agreement == 1.0
    # Fewer than 2k experts: a row can run out of outside experts, so the rows are compared.
    few = RoutingTrace.of_layers(np.tile(np.arange(3, dtype=np.int16), (1, 50, 1)),
                                 np.zeros(50, dtype=np.int32), np.zeros(50, dtype=np.int16), 4)
    injected = make_predictor("injected", "qwen3", 1, accuracy=0.0, error_bias="random")
    pred, agreement = injected.predict(few, 0, np.random.default_rng(1))
    assert agreement == topk_agreement(pred, few.layer(0)) > 0.0
    # One outside expert for three misses: the rows keep two routed experts, none repeated.
    ordered = np.sort(pred, axis=1)
    assert not np.any(ordered[:, 1:] == ordered[:, :-1])
    assert agreement == pytest.approx(2 / 3)


def test_lookahead_defaults_to_paper_ranges() -> None:
    for model, family in (("qwen3-235b-a22b", "qwen3"), ("glm-4.5", "glm")):
        acc = make_predictor("lookahead", model, 40).accuracy  # type: ignore[attr-defined]
        lo, hi = LOOKAHEAD_RANGES[family]
        assert lo <= acc.min() and acc.max() <= hi and acc.std() > 0


def test_injected_errors_follow_their_bias() -> None:
    t = trace(layers=1, skew=2.0)
    load = t.expert_load()[0]
    mean_pop = {}
    for bias in ("popular", "random"):
        pred = make_predictor("injected", "qwen3", 1, accuracy=0.0, error_bias=bias).predict(
            t, 0, np.random.default_rng(1)
        ).experts
        assert topk_agreement(pred, t.layer(0)) == 0.0
        mean_pop[bias] = load[pred].mean()
    assert mean_pop["popular"] > 1.5 * mean_pop["random"]


def test_lina_path_table_beats_popularity_only() -> None:
    profile, served = trace(seed=3, layer_correlation=0.95), trace(seed=4,
                                                                   layer_correlation=0.95)
    table = PathTable.build(profile)
    rng = np.random.default_rng(0)
    popular = np.argsort(-profile.expert_load(), axis=1)[:, :K]
    lina = np.mean([table.predict(served, i, rng).agreement
                    for i in range(1, served.layers)])
    base = np.mean([topk_agreement(np.broadcast_to(popular[i], (served.tokens, K)),
                                   served.layer(i)) for i in range(1, served.layers)])
    assert lina > base


def test_npz_round_trip(tmp_path: Path) -> None:
    t = trace(layers=2, requests=3, seq=64)
    path = tmp_path / "trace.npz"
    save_trace(path, t)
    back = load_trace(path, E, 2, K, seq_len=64)
    assert np.array_equal(back.experts, t.experts)
    assert np.array_equal(back.request, t.request)
    # A vLLM-style file with only the experts array: requests are seq_len-token chunks.
    np.savez(tmp_path / "bare.npz", experts=t.experts.astype(np.int32))
    bare = load_trace(tmp_path / "bare.npz", E, 2, K, seq_len=64)
    assert bare.requests == 3


@pytest.mark.parametrize(
    "arrays, raw",
    [
        (None, b"not a zip file"),
        ({"other": np.zeros((4, 2, K), dtype=np.int32)}, None),
        ({"experts": np.zeros((4, 2, K), dtype=np.float32)}, None),
        ({"experts": np.zeros((4, 3, K), dtype=np.int32)}, None),
        ({"experts": np.full((4, 2, K), E, dtype=np.int32)}, None),
        ({"experts": np.zeros((4, 2, K), dtype=np.int32)}, None),  # repeats in a row
    ],
)
def test_malformed_trace_is_one_line_input_error(
    tmp_path: Path, arrays: dict[str, np.ndarray] | None, raw: bytes | None
) -> None:
    path = tmp_path / "bad.npz"
    if raw is not None:
        path.write_bytes(raw)
    else:
        assert arrays is not None
        np.savez(path, **arrays)  # type: ignore[arg-type]
    with pytest.raises(InputError) as info:
        load_trace(path, E, 2, K, seq_len=64)
    assert "\n" not in info.value.line() and "workload.routing.trace" in info.value.line()


def test_missing_trace_and_unknown_dataset() -> None:
    with pytest.raises(InputError):
        load_trace("/nonexistent/trace.npz", E, 2, K, seq_len=64)
    scenario = Path(__file__).resolve().parents[1] / "scenarios" / "moe-qwen3-235b.yaml"
    with pytest.raises(InputError) as info:
        load_scenario(scenario, ["workload.routing.dataset=wikipedia"])
    assert "workload.routing.dataset" in info.value.line()


@pytest.mark.parametrize("k", [1, 2, 8, 17])
def test_repeats_in_rows_agrees_with_sorting(k: int) -> None:
    rng = np.random.default_rng(k)
    for _ in range(20):
        ids = rng.integers(0, 3 * k + 40, size=(6, 3, k))
        ordered = np.sort(ids, axis=-1)
        assert repeats_in_rows(ids) == bool(np.any(ordered[..., 1:] == ordered[..., :-1]))
    distinct = np.argsort(rng.random((5, 4, 3 * k)), axis=-1)[..., :k]
    assert not repeats_in_rows(distinct)
    distinct[2, 1, -1] = distinct[2, 1, 0]
    assert repeats_in_rows(distinct) == (k > 1)
