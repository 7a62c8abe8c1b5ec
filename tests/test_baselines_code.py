"""WLB-LLM and DistCA as their code runs them: one hand-checked small case per modelling
decision (docs/model.md A, "WLB-LLM as run" and "DistCA as run")."""

from __future__ import annotations

import numpy as np
import pytest

from libra_des import api
from libra_des.config import ROOT, ModelSpec, load_scenario
from libra_des.errors import InputError
from libra_des.plan.balancers import distca as distca_balancer
from libra_des.plan.balancers import registry
from libra_des.plan.balancers import wlb_llm as wlb_balancer
from libra_des.plan.distca import distca_attention_plan, initial_tasks, schedule
from libra_des.plan.wlb_llm import (
    choose_sharding,
    doc_chunks,
    pack_bins,
    per_document,
    per_sequence,
    tile_load,
    wlb_attention_plan,
)
from libra_des.workload.packing import pack


def model(heads_q: int = 4, heads_kv: int = 2) -> ModelSpec:
    return ModelSpec(name="t", layers=1, hidden=heads_q * 8, heads_q=heads_q, heads_kv=heads_kv,
                     head_dim=8, ffn=64, vocab=16)


# ----------------------------------------------------------------------------- WLB-LLM


def test_wlb_packing_is_the_codes_two_pass_greedy() -> None:
    # Breakpoint 4, so a document of l costs (l/4)² + l/4; 2 bins of at most 8 tokens.
    # 5 -> bin 0 (tie: lowest index; 2.8125). 4 -> bin 1 (2.0). 3 -> bin 1, the least work,
    # 7 tokens (3.3125). 3 -> bin 0 (2.8125 < 3.3125), 8 tokens (4.125). 2 -> bin 1 least
    # work but 9 > 8; bin 1 also has the fewest tokens (7), still 9 > 8: it waits.
    # 1 -> bin 1 (3.3125), 8 tokens (3.625). The waiting 2 -> least work, no cap: bin 1.
    slot = pack_bins(np.array([5, 4, 3, 3, 2, 1]), 8, 2, breakpoint=4)
    assert slot.tolist() == [0, 1, 1, 0, 1, 1]


def test_wlb_fewest_tokens_fallback() -> None:
    # Breakpoint 1 (l² + l), cap 7, longest first: 6 -> bin 0 (42); 5 -> bin 1 (30);
    # 2 -> bin 1, the least work, 7 tokens (36); 1 -> bin 1 is still the least work but
    # 7 + 1 > 7, so it goes to the bin of fewest tokens, bin 0 (6 + 1 <= 7).
    slot = pack_bins(np.array([6, 5, 1, 2]), 7, 2, breakpoint=1)
    assert slot.tolist() == [0, 1, 0, 1]


def test_wlb_balancer_packs_the_steps_samples_into_gbs_microbatches() -> None:
    sc = load_scenario(ROOT / "scenarios" / "paper-attention-microbench-256k.yaml",
                       ["balancer.policy=wlb_llm", "parallelism.gbs=2", "parallelism.dp=2"])
    window = pack(np.array([9_000, 5_000, 3_000, 2_000, 1_000]), 16_384)
    batch, changed, deferred = wlb_balancer.repack(sc, window, np.zeros(0, np.int64))
    # Breakpoint 128Ki = 131,072: 9,000 -> bin 0 (0.0733); 5,000 -> bin 1; 3,000 -> bin 1
    # (0.0630 < 0.0733); 2,000 -> bin 1 (still the least work), now 0.0785; 1,000 -> bin 0.
    assert [batch.seq(i).tolist() for i in range(2)] == [[9_000, 1_000], [5_000, 3_000, 2_000]]
    assert not changed and deferred.size == 0


def test_wlb_per_document_chunks_and_remainder_round_robin() -> None:
    # 10 = 4 x 2 + 2: chunks 0, 1 get the extra tokens; the round-robin goes on at chunk 2:
    # 7 = 4 x 1 + 3: chunks 2, 3, 0; 3 = 0 + 3: chunks 1, 2, 3.
    assert doc_chunks(np.array([10, 7, 3]), 2).tolist() == [[3, 3, 2, 2], [2, 1, 2, 2],
                                                            [0, 1, 1, 1]]


def test_wlb_per_document_balances_pairs_and_records_chunk_shapes() -> None:
    # One document of 8 at cp 2: chunks of 2; rank 0 runs chunks 0 (2 queries, 2 keys: 3
    # pairs) and 3 (2 queries, 8 keys: 2 x 6 + 3 = 15); rank 1 chunks 1 (7) and 2 (11).
    m = model()
    plan = wlb_attention_plan(np.array([8]), cp=2, model=m, rule="per_document")
    assert (plan.worker_pairs / m.heads_q).tolist() == [18.0, 18.0]
    assert plan.worker_query_len is not None and plan.worker_key_len is not None
    assert plan.worker_query_len.tolist() == [2.0, 2.0]
    assert plan.worker_key_len[0] == pytest.approx((3 * 2 + 15 * 8) / 18)
    assert plan.worker_key_len[1] == pytest.approx((7 * 4 + 11 * 6) / 18)
    # K and V all-gathered: each rank sends its 4 tokens' K and V to the other.
    kv = 4 * 2 * m.heads_kv * m.head_dim * m.dtype_bytes
    assert plan.dispatch_bytes.tolist() == [[0.0, kv], [kv, 0.0]]
    assert plan.return_bytes.sum() == 0.0 and plan.worker_heads.tolist() == [4, 4]


def test_wlb_per_sequence_loads_and_the_adaptive_choice() -> None:
    # [6144, 2048] at cp 2: blocks of 2048; rank 0 runs block 0 (2048 x 2049 / 2 = 2,098,176)
    # and block 3 (the short document, the same); rank 1 blocks 1 (2048 x 2048 + 2,098,176)
    # and 2 (2048 x 4096 + 2,098,176), 16,779,264 together: per-sequence is unbalanced,
    # per-document is not.
    lens = np.array([6144, 2048])
    rank, q, k, _ = per_sequence(lens, 2)
    pairs = q * (k - q) + q * (q + 1) // 2
    assert np.bincount(rank, weights=pairs).tolist() == [4_196_352, 16_779_264]
    assert choose_sharding(lens, 2) == "per_document"
    # 64 documents of 64 at cp 2: per-document cuts 16-token chunks, each a whole 128-row
    # tile: rank 0's chunks 0 and 3 cover 128 x (16 + 32) + 128 x (64 + 32) cells (keys plus
    # half a 64-key block), x 64 documents = 1,179,648; per-sequence runs 32 whole documents
    # per rank, 128 x (64 + 32) each = 393,216.
    small = np.full(64, 64)
    assert tile_load(*per_document(small, 2)[:3], 2) == 1_179_648
    assert tile_load(*per_sequence(small, 2)[:3], 2) == 393_216
    assert choose_sharding(small, 2) == "per_sequence"
    assert wlb_attention_plan(small, cp=2, model=model()).sharding == "per_sequence"


def test_kernel_model_prices_chunks_by_their_shape() -> None:
    cost = api.cost_model()
    pairs, length = 1024 * 1025 / 2, 1024.0
    whole = cost.attention(pairs, length, 32, 8, 128)
    # A whole document written as a chunk (q = k = l) is the same call.
    assert float(cost.attention(pairs, length, 32, 8, 128, shard=(length, length))) == (
        pytest.approx(float(whole), rel=1e-12))
    # The same pairs as per-document chunks of 64 queries at cp 8 cost more (partial tiles).
    chunked = cost.attention(pairs, length, 32, 8, 128, shard=(64.0, 544.0))
    assert float(chunked) > float(whole)


def test_wlb_knobs_are_validated() -> None:
    base = ROOT / "scenarios" / "quickstart.yaml"
    with pytest.raises(InputError):
        api.load_scenario(base, ["balancer.policy=wlb_llm", "balancer.wlb_cp_sharding=bogus"])
    with pytest.raises(InputError):
        api.load_scenario(base, ["balancer.policy=wlb_llm_ideal",
                             "balancer.wlb_cp_sharding=per_document"])
    sc = api.load_scenario(base, ["balancer.policy=wlb_llm",
                                  "balancer.wlb_cp_sharding=per_sequence"])
    assert wlb_balancer.sharded(sc, [np.array([8])]).sharding == "per_sequence"


def test_the_former_models_stay_registered() -> None:
    names = registry.names()
    assert {"wlb_llm", "wlb_llm_ideal", "distca", "distca_tiles"} <= set(names)
    assert registry.get("distca_tiles").runs_tap and not registry.get("distca").runs_tap


# ----------------------------------------------------------------------------- DistCA


def test_distca_tasks_start_where_the_mlp_layout_puts_them() -> None:
    # Replica 0 = [100, 20, 12] over 2 GPUs of 66 tokens: 100 spans GPU 0 (66: head [0, 33),
    # tail [67, 100)) and GPU 1 (34: head [33, 50) with 50 keys, tail [50, 67) with 67 keys);
    # 20 and 12 are whole tasks on GPU 1.
    t = initial_tasks([np.array([100, 20, 12])], 2, 66)
    assert t.server.tolist() == [0, 1, 1, 1]
    assert t.hq.tolist() == [33, 17, 20, 12] and t.hk.tolist() == [33, 50, 20, 12]
    assert t.tq.tolist() == [33, 17, 0, 0] and t.tk.tolist() == [100, 67, 0, 0]
    assert t.work().sum() == 100 * 101 / 2 + 20 * 21 / 2 + 12 * 13 / 2


def test_distca_scheduler_moves_head_tail_pairs_to_the_needy_server() -> None:
    # Servers: [8] (36 pairs) and [2] (3); mean 19.5, tolerance 1.95. Server 1 needs 16.5:
    # the only donor task moves floor(16.5 / 9) = 1 query pair: head query 3 (4 keys) and
    # tail query 4 (5 keys), 9 pairs. Still 7.5 needed, but floor(7.5 / 9) = 0: it stops.
    m = model()
    tasks = schedule(initial_tasks([np.array([8]), np.array([2])], 1, 8), 2, m)
    assert np.bincount(tasks.server, weights=tasks.work()).tolist() == [27.0, 12.0]
    assert (tasks.hq[-1], tasks.hk[-1], tasks.tq[-1], tasks.tk[-1]) == (1, 4, 1, 5)
    plan = distca_attention_plan([np.array([8]), np.array([2])], cp=1, model=m,
                                 packed_length=8)
    width = m.head_dim * m.dtype_bytes
    # Q of the 2 moved queries, and K, V of the 5-key prefix, from GPU 0 to server 1 ...
    assert plan.dispatch_bytes[0, 1] == 2 * m.heads_q * width + 5 * 2 * m.heads_kv * width
    # ... and O with its fp32 softmax statistics back.
    assert plan.return_bytes[1, 0] == 2 * m.heads_q * (width + 4)
    assert plan.chunks == 2 and plan.tiles == 3


def test_distca_scheduler_prefers_fewer_bytes_per_pair() -> None:
    # Server 0 holds [40, 4] (820 + 10 pairs), servers 1 and 2 hold [2] each (3 pairs); mean
    # 278.67, tolerance 27.87. Server 1 needs 275.67. Bytes per pair (Q of the queries moved,
    # K, V of l + 1 keys; 32 bytes' width each here): the 40-token task (275.67/41 x 32 +
    # 41 x 32) / 275.67 = 5.5, the 4-token one (10/5 x 32 + 5 x 32) / 10 = 22.4: the long one
    # moves first, split: floor(275.67 / 41) = 6 query pairs (246 pairs). For the 29.67 still
    # needed the long one costs (29.67/41 x 32 + 41 x 32) / 29.67 = 45 > 22.4: the 4-token
    # task moves whole, leaving 19.67 < 27.87.
    m = model()
    tasks = schedule(initial_tasks([np.array([40, 4]), np.array([2]), np.array([2])], 1, 44),
                     3, m)
    assert (tasks.doc[4], tasks.hq[4], tasks.tq[4], tasks.server[4]) == (40, 6, 6, 1)
    assert tasks.server[1] == 1


def test_distca_balancer_and_its_scheduler_cost() -> None:
    sc = load_scenario(ROOT / "scenarios" / "quickstart.yaml",
                       ["balancer.policy=distca", "parallelism.dp=2", "parallelism.cp=2",
                        "parallelism.pp=1", "parallelism.gbs=2"])
    plan = distca_balancer.servers_plan(sc, [np.array([1000, 100]), np.array([64])])
    assert plan.workers == 4 and plan.policy == "distca"
    assert distca_balancer.scheduler_ops(plan.tiles, 4) == plan.tiles * 4


def test_wlb_bin_k_runs_on_replica_k_mod_dp() -> None:
    # The code hands DP rank r the bins r, r + dp, r + 2dp, ... (test_wlb_e2e.py's
    # my_batch_ranks); the step planner's arrival order puts sequence k on replica k mod dp,
    # microbatch k div dp: the same.
    from libra_des.plan.step import build_step_plan
    from libra_des.workload.packing import make_stream

    sc = api.load_scenario(ROOT / "scenarios" / "quickstart.yaml",
                           ["balancer.policy=wlb_llm", "parallelism.dp=2", "parallelism.pp=1",
                            "parallelism.gbs=6"])
    plan = build_step_plan(sc, make_stream(sc.workload, np.random.default_rng(0)))
    dp, m = 2, sc.parallelism.microbatches
    assert [[int(plan.seq_of[e, j, 0]) for j in range(m)] for e in range(dp)] == [
        [j * dp + e for j in range(m)] for e in range(dp)]
