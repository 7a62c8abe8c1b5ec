"""Training memory model against hand-computed figures, and its check and time pricing."""

from __future__ import annotations

from typing import Any

import pytest

from libra_des.cli import main
from libra_des.config import ROOT, load_scenario
from libra_des.config import TrainingScenario as Scenario
from libra_des.errors import InputError
from libra_des.hardware.compute import memory as mem
from libra_des.kinds.simulation import simulate
from libra_des.sim.training.memory import PlanFootprint, check_memory, held_layers, stage_memory
from libra_des.sim.training.schedules import build_schedule
from libra_des.sim.training.simulator import layout_of

DENSE = {"name": "tiny-dense", "layers": 4, "hidden": 64, "heads_q": 4, "heads_kv": 2,
         "head_dim": 16, "ffn": 128, "vocab": 1000}
MOE = {"name": "tiny-moe", "layers": 4, "hidden": 64, "heads_q": 4, "heads_kv": 2,
       "head_dim": 16, "experts": 8, "top_k": 2, "expert_ffn": 32, "vocab": 1000}


def tiny(model: dict[str, Any], **memory: Any) -> Scenario:
    return Scenario.model_validate({
        "model": model,
        "workload": {"packed_length": 4096, "lengths": {"kind": "constant", "value": 512}},
        "parallelism": {"dp": 2, "cp": 2, "pp": 2, "gbs": 8, "schedule": "1f1b"},
        "balancer": {"policy": "ulysses"},
        "memory": memory,
    })


def stages(sc: Scenario, tokens: float = 2048, remote: float = 0.0, chunks: int = 1) -> Any:
    par = sc.parallelism
    sched = build_schedule(par.schedule, par.pp, par.microbatches, par.virtual_stages)
    return stage_memory(sc, sched, layout_of(sc), PlanFootprint(tokens, remote, chunks),
                        "H200-SXM").stages


# Hand-computed per-layer figures (bf16, see hardware/compute/memory.py):
# attention 64*(4+2*2)*16 + 4*16*64 = 12,288 weights, two norms 128;
# dense FFN 3*64*128 = 24,576; MoE router 64*8 = 512, experts 8*3*64*32 = 49,152 over EP.
DENSE_LAYER = 12_288 + 128 + 24_576
MOE_REPLICATED, MOE_EXPERTS = 12_288 + 128 + 512, 49_152
# Activations per token and layer: norms 4*64*2 = 512, QKV (4+4)*16*2 = 256,
# O + fp32 LSE 4*16*2 + 4*4 = 144; dense SwiGLU 3*128*2 = 768;
# MoE 2 copies x (2*64 + 3*32) x 2 = 896 plus fp32 router probabilities 8*4 = 32.
DENSE_ACT, MOE_ACT = 512 + 256 + 144 + 768, 512 + 256 + 144 + 928
# Selective drops the two norm outputs (2*64*2) and SwiGLU outputs (ffn or top_k*expert_ffn).
DENSE_SEL, MOE_SEL = DENSE_ACT - 256 - 256, MOE_ACT - 256 - 128


def test_dense_states_by_hand() -> None:
    first, last = stages(tiny(DENSE))
    params = 2 * DENSE_LAYER + 64_000  # two layers and the embedding (last: the LM head)
    assert first.weights == pytest.approx(2 * params)
    assert first.gradients == pytest.approx(4 * params)
    assert first.optimizer == pytest.approx(12 * params / 4)  # ZeRO-1 over DP x CP = 4
    assert last.weights == first.weights
    no_zero = stages(tiny(DENSE, distributed_optimizer=False))[0]
    assert no_zero.optimizer == pytest.approx(12 * params)


def test_moe_states_by_hand() -> None:
    first = stages(tiny(MOE))[0]
    replicated = 2 * MOE_REPLICATED + 64_000
    experts = 2 * MOE_EXPERTS / 2  # EP over the CP group of 2
    assert first.weights == pytest.approx(2 * (replicated + experts))
    assert first.optimizer == pytest.approx(12 * (replicated / 4 + experts / 2))


@pytest.mark.parametrize(("model", "act", "sel"), [(DENSE, DENSE_ACT, DENSE_SEL),
                                                   (MOE, MOE_ACT, MOE_SEL)])
def test_activations_per_schedule_and_recompute(model: dict[str, Any], act: int, sel: int) -> None:
    tokens = 2048
    # 1F1B, p = 2, m = 4: stage 0 holds 2 microbatches x 2 layers, stage 1 holds 1 x 2.
    first, last = stages(tiny(model), tokens)
    assert first.held_layer_microbatches == 4 and last.held_layer_microbatches == 2
    assert first.activations == pytest.approx(4 * tokens * act)
    assert stages(tiny(model, recompute="selective"), tokens)[0].activations == pytest.approx(
        4 * tokens * sel)
    full = stages(tiny(model, recompute="full"), tokens)[0]
    assert full.activations == pytest.approx(4 * tokens * 64 * 2)  # the layer input only
    # Transient: one layer's full activations; on the last stage the bf16 logits win.
    assert full.transient == pytest.approx(tokens * act)
    assert stages(tiny(model), tokens)[1].transient == pytest.approx(tokens * 1000 * 2)


def test_gpipe_holds_every_microbatch() -> None:
    sc = load_scenario_tiny(["parallelism.schedule=gpipe"])
    assert [s.held_layer_microbatches for s in stages(sc)] == [8, 8]


def test_interleaved_holds_megatron_warmup_plus_one() -> None:
    sc = load_scenario_tiny(["parallelism.schedule=interleaved", "parallelism.virtual_stages=2"])
    par = sc.parallelism
    sched = build_schedule(par.schedule, par.pp, par.microbatches, par.virtual_stages)
    # Warm-up forwards 2(p-d-1) + (v-1)p, one more before the first backward; 1 layer each.
    assert [held_layers(sched, d, layout_of(sc)) for d in range(2)] == [5, 3]


def load_scenario_tiny(extra: list[str]) -> Scenario:
    base = tiny(DENSE).model_dump(mode="json")
    sc = Scenario.model_validate(base)
    for text in extra:
        key, _, value = text.partition("=")
        section, field = key.split(".")
        data = sc.model_dump(mode="json")
        data[section][field] = int(value) if value.isdigit() else value
        sc = Scenario.model_validate(data)
    return sc


def test_remote_buffers_kept_or_transient() -> None:
    kept = stages(tiny(DENSE), remote=1e6, chunks=4)[0]
    assert kept.remote_buffers == pytest.approx(4 * 1e6)
    freed = stages(tiny(DENSE, keep_remote_kv=False), remote=1e6, chunks=4)[0]
    assert freed.remote_buffers == 0.0
    # Pipeliner working set: chunks k-1, k, k+1 of M = 4 beside one layer's activations.
    assert freed.transient == pytest.approx(2048 * DENSE_ACT + 3 / 4 * 1e6)


def test_check_names_stage_need_and_capacity() -> None:
    sc = tiny(DENSE)
    par = sc.parallelism
    sched = build_schedule(par.schedule, par.pp, par.microbatches, par.virtual_stages)
    report = stage_memory(sc, sched, layout_of(sc), PlanFootprint(2048, 500e9, 1), "H200-SXM")
    with pytest.raises(InputError, match=r"stage 0 needs .* GiB .* usable .* H200-SXM"):
        check_memory(sc, report)
    check_memory(tiny(DENSE, check="warn"), report)  # warn: no error
    assert report.oom


def test_hbm_by_datasheet_name() -> None:
    assert mem.device_hbm("H200-SXM") == 141e9
    with pytest.raises(InputError, match=r"topology\.gpu"):
        mem.device_hbm("TPU")


def test_quickstart_without_recompute_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["run", str(ROOT / "scenarios" / "quickstart.yaml"),
                 "--set", "memory.recompute=none", "--out", "/nonexistent/never-written"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.count("\n") == 0 and "stage 0 needs" in err and "GiB usable" in err


SMALL = ["parallelism.dp=4", "parallelism.cp=4", "parallelism.pp=1", "parallelism.gbs=8",
         "balancer.pool_size=4", "steps=1", "workload=longctx-256k", "model.layers=4",
         "variance.enabled=false", "balancer.heads_split=4", "balancer.block_size=16384",
         "topology_params.nodes=4"]  # DP groups one per node (until the layout fix lands)


def run(extra: list[str]) -> dict[str, Any]:
    res, _ = simulate(load_scenario(ROOT / "scenarios" / "quickstart.yaml", [*SMALL, *extra]))
    return res


def test_full_recompute_adds_one_forward_per_backward() -> None:
    free = ["comm_free=true", "memory.check=warn"]
    none = run([*free, "memory.recompute=none"])
    full = run([*free, "memory.recompute=full"])
    selective = run([*free, "memory.recompute=selective"])
    extra = full["step_time_s"]["mean"] - none["step_time_s"]["mean"]
    # PP 1 and free communication: the step is every op in a row, so full recomputation adds
    # exactly the forward ops' time once more.
    assert extra == pytest.approx(sum(none["microbatch_forward_s"]), rel=1e-9)
    assert none["step_time_s"]["mean"] < selective["step_time_s"]["mean"] < full["step_time_s"][
        "mean"]
    assert full["peak_memory_gib"][0] < selective["peak_memory_gib"][0] < none["peak_memory_gib"][0]
    assert full["mfu"] < none["mfu"]  # model FLOPs exclude recomputation


def test_freed_remote_tiles_are_fetched_again() -> None:
    kept = run(["memory.recompute=full", "memory.keep_remote_kv=true"])
    freed = run(["memory.recompute=full", "memory.keep_remote_kv=false"])

    def comm(r: dict[str, Any]) -> float:
        return float(r["attention_comm_exposed_s"] + r["attention_comm_hidden_s"])

    assert comm(freed) > comm(kept)
    assert freed["memory"]["per_stage"][0]["breakdown_gib"]["remote_buffers"] == 0.0
    assert kept["memory"]["per_stage"][0]["breakdown_gib"]["remote_buffers"] > 0.0


def test_memory_is_refused_before_any_step_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from libra_des.sim.training import simulator as training

    def never(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("a step was simulated before the memory check")

    monkeypatch.setattr(training, "simulate_step", never)
    monkeypatch.setattr(training, "choose_tap_knobs", never)  # the floor check comes first
    sc = load_scenario(ROOT / "scenarios" / "quickstart.yaml", [*SMALL, "memory.recompute=none",
                                                               "workload=longctx-1m"])
    with pytest.raises(InputError, match="stage 0 needs"):
        simulate(sc)
