"""The configuration simulator of the Libra training paper (docs/model.md A): ``libra-des plan``
and :func:`libra_des.api.replay_plans` both run it.

For each candidate (grouping policy, pool size P, head split H, block size B) it replays the
planners over N windows of GBS packed sequences drawn from the corpus and reports:

* inter-pool imbalance R - 1 (R = max pool load / mean pool load, load = Σ F_i = Σ Σ l²),
  mean and max over the windows, beside the analytic LLN estimate
  E[R] - 1 ≈ (CV/√P)·√(2 ln(D/P)) with CV measured over every window's F_i;
* intra-pool imbalance and forward exchange bytes per layer of TAP on the *heaviest* pool of
  each window (W = P·cp workers), averaged over the windows;
* plan_seconds: wall time of grouping plus TAP per window (mean).

Every policy sees the same windows (drawn once from ``--seed``), and the random grouping is
re-seeded identically for every row, so comparisons are paired. ``wlb_llm`` re-packs each
window's raw samples with WLB-LLM's variable-length packing (no outlier deferral, as in the
paper's comparison) and forms pools of P consecutive microbatches.

Defaults (documented choices): the 1M corpus, Qwen3-30B-A3B, GBS 128, P 8, H 1, B 16,384,
slack 0.03, 20 windows, policy vrsp, and cp = L / 128K tokens (8 for the 1M corpus, one
8-GPU node per CP group; 2 for 256K), so each worker holds about 128K tokens of a sequence.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from libra_des.config import (
    ModelSpec,
    WorkloadSpec,
    load_workload,
    read_yaml,
    resolve_path,
    validate,
)
from libra_des.errors import InputError
from libra_des.plan.baselines import wlb_cost_coefficients, wlb_llm_pack
from libra_des.plan.grouping import GROUPINGS, Grouping, group, lln_estimate
from libra_des.plan.tap import plan_pool
from libra_des.kinds.preflight import check_plan_sizes
from libra_des.workload.packing import PackedBatch, make_stream

#: What `--policy` takes: the groupings, plus WLB-LLM's packing (which groups as it packs).
PLAN_POLICIES = (*GROUPINGS, "wlb_llm")
DEFAULT_WORKLOAD = "longctx-1m"
DEFAULT_MODEL = "qwen3-30b-a3b"


@dataclass(frozen=True)
class PlanSettings:
    """Everything one ``plan`` invocation replays (validated)."""

    workload: WorkloadSpec
    model: ModelSpec
    gbs: int
    cp: int
    pool_sizes: tuple[int, ...]
    heads_splits: tuple[int, ...]
    block_sizes: tuple[int, ...]
    policies: tuple[str, ...]
    windows: int
    seed: int
    slack: float = 0.03


# ----------------------------------------------------------------------------- settings


def load_model(ref: str) -> ModelSpec:
    """A model by shipped name (``workloads/models``) or by path."""
    found = resolve_path(ref, Path.cwd(), "workloads/models", (".yaml", ".yml"))
    if found is None:
        raise InputError("--model", ref, "a model name in workloads/models/ or a YAML file")
    model: ModelSpec = validate(ModelSpec, read_yaml(found, "--model"), "model.")
    return model


def default_cp(packed_length: int) -> int:
    """CP degree holding about 128K tokens per worker (1M -> 8, 256K -> 2): our choice."""
    return max(1, round(packed_length / 131_072))


def check_policies(names: Sequence[str]) -> tuple[str, ...]:
    for name in names:
        if name not in PLAN_POLICIES:
            raise InputError("--policy", name, " | ".join(PLAN_POLICIES))
    return tuple(dict.fromkeys(names))


def is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def check_types(
    counts: Mapping[str, Any], lists: Mapping[str, Any], policies: Sequence[str] | None
) -> None:
    """Integers where counts go (seed >= 0, the others >= 1), non-empty lists of them."""
    for name, value in counts.items():
        least = 0 if name == "seed" else 1
        if value is not None and (not is_int(value) or value < least):
            raise InputError(name, value, f"an integer >= {least}")
    for name, values in lists.items():
        if values is not None and (isinstance(values, str) or not values
                                   or not all(is_int(v) and v >= 1 for v in values)):
            raise InputError(name, values, "a non-empty list of integers >= 1")
    if policies is not None and (isinstance(policies, str) or not policies):
        raise InputError("policies", policies, "a non-empty list of policy names")


def settings(
    workload: str | None = None,
    *,
    scenario: str | None = None,
    overrides: Sequence[str] = (),
    model: str | None = None,
    gbs: int | None = None,
    cp: int | None = None,
    pool_sizes: Sequence[int] | None = None,
    heads_splits: Sequence[int] | None = None,
    block_sizes: Sequence[int] | None = None,
    policies: Sequence[str] | None = None,
    windows: int = 20,
    seed: int | None = None,
) -> PlanSettings:
    """Resolve the given values over the scenario (or workload) defaults, then validate them.

    ``None`` takes the default (the scenario's value with ``scenario``); numbers arrive parsed
    (the command parses its flags; :func:`check_types` holds a Python caller to the same).
    """
    check_types({"gbs": gbs, "cp": cp, "windows": windows, "seed": seed},
                {"pool_sizes": pool_sizes, "heads_splits": heads_splits,
                 "block_sizes": block_sizes}, policies)
    if workload and scenario:
        raise InputError("--scenario", scenario, "either --scenario or --workload, not both")
    base: dict[str, Any] = {
        "gbs": 128, "cp": None, "pool": 8, "heads": 1, "block": 16_384, "seed": 0, "slack": 0.03,
    }
    if scenario:
        # Lazy: the scenario models are built only for --scenario (start-up time).
        from libra_des.config.scenario import load_scenario, require_training

        sc = require_training(load_scenario(scenario, list(overrides)),
                              "plan replays training planners")
        spec, chosen = sc.workload, sc.model
        bal, par = sc.balancer, sc.parallelism
        # ``auto`` knobs are chosen per run (see --tap); the table then shows H 1, B 16K.
        heads = bal.heads_split if isinstance(bal.heads_split, int) else 1
        block = bal.block_size if isinstance(bal.block_size, int) else 16_384
        base.update(gbs=par.gbs, cp=par.cp, pool=bal.pool_size, heads=heads,
                    block=block, seed=sc.seed, slack=bal.slack)
    else:
        spec = load_workload(workload or DEFAULT_WORKLOAD, list(overrides))
        chosen = load_model(DEFAULT_MODEL)
    if model:
        chosen = load_model(model)
    if spec.lengths is None:
        raise InputError("workload.lengths", None, "a length distribution (training corpus)")
    s = PlanSettings(
        workload=spec,
        model=chosen,
        gbs=base["gbs"] if gbs is None else int(gbs),
        cp=int(cp) if cp is not None else base["cp"] or default_cp(spec.packed_length),
        pool_sizes=tuple(int(v) for v in pool_sizes or (base["pool"],)),
        heads_splits=tuple(int(v) for v in heads_splits or (base["heads"],)),
        block_sizes=tuple(int(v) for v in block_sizes or (base["block"],)),
        policies=check_policies(policies or ("vrsp",)),
        windows=int(windows),
        seed=base["seed"] if seed is None else int(seed),
        slack=float(base["slack"]),
    )
    check_settings(s)
    return s


def check_settings(s: PlanSettings) -> None:
    """Cross-flag rules: P | GBS and H | heads_q; sizes this machine can replay."""
    rows = len(s.pool_sizes) * len(s.heads_splits) * len(s.block_sizes) * len(s.policies)
    check_plan_sizes(s.gbs, s.cp, s.pool_sizes, rows, s.windows, s.workload.packed_length,
                     min(s.block_sizes))
    for p in s.pool_sizes:
        if s.gbs % p:
            raise InputError("--pool-size", p, f"a divisor of --gbs={s.gbs}")
    for h in s.heads_splits:
        if s.model.heads_q % h:
            raise InputError("--heads-split", h, f"a divisor of heads_q={s.model.heads_q}")


# ----------------------------------------------------------------------------- replay


@dataclass(frozen=True)
class GroupedWindow:
    """One window after grouping: the batch the pools index, the grouping, its wall time."""

    batch: PackedBatch
    grouping: Grouping
    seconds: float


def draw_windows(s: PlanSettings) -> list[PackedBatch]:
    """N consecutive GBS windows of the corpus stream (shared by every policy)."""
    stream = make_stream(s.workload, np.random.default_rng(s.seed))
    return [stream.next_window(s.gbs) for _ in range(s.windows)]


def raw_samples(batch: PackedBatch) -> np.ndarray:
    """The window's raw sample lengths (its pieces re-joined by origin id, arrival order)."""
    ids = batch.sample_ids
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    return np.add.reduceat(batch.lengths.astype(np.int64), starts)


def wlb_window(s: PlanSettings, batch: PackedBatch, pool_size: int) -> GroupedWindow:
    """WLB-LLM re-packs the window's samples; pools are P consecutive microbatches."""
    began = time.perf_counter()
    packed = wlb_llm_pack(
        raw_samples(batch), s.workload.packed_length, s.gbs,
        defer_outliers=False, coefficients=wlb_cost_coefficients(s.model),
    ).batch
    weights = packed.sum_sq()
    pools = np.arange(s.gbs, dtype=np.int64).reshape(-1, pool_size)
    grouping = Grouping("wlb_llm", pools, weights[pools].sum(axis=1))
    return GroupedWindow(packed, grouping, time.perf_counter() - began)


#: ``--policy`` names that re-pack the window before grouping it (a balancer's own packer).
REPACKERS: Mapping[str, Callable[[PlanSettings, PackedBatch, int], GroupedWindow]] = {
    "wlb_llm": wlb_window,
}


def group_windows(
    s: PlanSettings, windows: Sequence[PackedBatch], policy: str, pool_size: int
) -> list[GroupedWindow]:
    """Group every window; the grouping RNG restarts from the seed for each (policy, P)."""
    repack = REPACKERS.get(policy)
    if repack is not None:
        return [repack(s, b, pool_size) for b in windows]
    rng = np.random.default_rng(np.random.SeedSequence(s.seed).spawn(2)[1])
    out = []
    for batch in windows:
        began = time.perf_counter()
        grouping = group(policy, batch.sum_sq(), pool_size, rng)
        out.append(GroupedWindow(batch, grouping, time.perf_counter() - began))
    return out


def load_cv(grouped: Sequence[GroupedWindow]) -> float:
    """CV of the per-sequence load F_i pooled over the windows (input of the LLN estimate)."""
    f = np.concatenate([g.batch.sum_sq() for g in grouped])
    return float(f.std() / f.mean()) if f.mean() > 0 else 0.0


def tap_row(
    s: PlanSettings, grouped: Sequence[GroupedWindow], heads: int, block: int
) -> dict[str, float]:
    """TAP on each window's heaviest pool: mean intra-pool imbalance, bytes, plan time."""
    intra, nbytes, secs = [], [], []
    for g in grouped:
        seqs = [g.batch.seq(int(i)) for i in g.grouping.pools[g.grouping.heaviest]]
        began = time.perf_counter()
        pool = plan_pool(seqs, cp=s.cp, model=s.model, heads_split=heads, block_size=block,
                         packed_length=s.workload.packed_length, slack=s.slack)
        secs.append(g.seconds + time.perf_counter() - began)
        intra.append(pool.attention.imbalance)
        nbytes.append(pool.exchange_bytes)
    return {
        "intra_pool_imbalance": float(np.mean(intra)),
        "exchange_bytes_per_layer": float(np.mean(nbytes)),
        "plan_seconds": float(np.mean(secs)),
    }


def replay(s: PlanSettings, advance: Callable[[], None] = lambda: None) -> list[dict[str, Any]]:
    """Every (policy, P, H, B) row of the configuration simulator."""
    windows = draw_windows(s)
    rows: list[dict[str, Any]] = []
    for pool_size in s.pool_sizes:
        for policy in s.policies:
            grouped = group_windows(s, windows, policy, pool_size)
            inter = np.array([g.grouping.imbalance for g in grouped])
            lln = lln_estimate(load_cv(grouped), pool_size, s.gbs)
            for heads in s.heads_splits:
                for block in s.block_sizes:
                    rows.append({
                        "policy": policy, "pool_size": pool_size, "heads_split": heads,
                        "block_size": block, "inter_pool_imbalance": float(inter.mean()),
                        "inter_pool_imbalance_max": float(inter.max()), "lln_estimate": lln,
                        **tap_row(s, grouped, heads, block),
                    })
                    advance()
    return rows
