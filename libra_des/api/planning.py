"""The planners without a simulation: the configuration simulator (``libra-des plan``) and the
TAP (H, B) ranking that ``auto`` knobs use (``plan --scenario S --tap``).

:mod:`libra_des.runs.plan_replay` replays groupings and TAP over corpus windows;
:mod:`libra_des.sim.training.tap_autotune` ranks TAP's candidates. Every function imports
them inside its body.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from libra_des.api.scenarios import load_training
from libra_des.errors import InputError

if TYPE_CHECKING:
    from libra_des.runs.plan_replay import PlanSettings as PlanSettings
    from libra_des.sim.training.tap_autotune import Ranking as Ranking

__all__ = [
    "TapRanking", "default_plan_model", "max_seed", "plan_policies", "plan_settings", "rank_tap",
    "replay_windows",
]


def plan_policies() -> tuple[str, ...]:
    """The policies ``plan --policy`` replays: the groupings and WLB-LLM."""
    from libra_des.runs.plan_replay import PLAN_POLICIES

    return PLAN_POLICIES


def default_plan_model() -> str:
    """The model ``plan`` replays when none is named."""
    from libra_des.runs.plan_replay import DEFAULT_MODEL

    return DEFAULT_MODEL


def max_seed() -> int:
    """The largest seed a scenario (and a corpus stream) accepts."""
    from libra_des.config.validation import MAX_SEED

    return MAX_SEED


def plan_settings(
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
    """The replay's settings, resolved (defaults, or the scenario's) and validated."""
    from libra_des.runs.plan_replay import settings

    return settings(workload, scenario=scenario, overrides=overrides, model=model, gbs=gbs,
                    cp=cp, pool_sizes=pool_sizes, heads_splits=heads_splits,
                    block_sizes=block_sizes, policies=policies, windows=windows, seed=seed)


def replay_windows(s: PlanSettings, advance: Callable[[], None] = lambda: None
                   ) -> list[dict[str, Any]]:
    """One row per (policy, P, H, B) over the settings' windows; ``advance`` after each."""
    from libra_des.runs.plan_replay import replay

    return replay(s, advance)


@dataclass(frozen=True)
class TapRanking:
    """Every TAP (H, B) candidate of a scenario, best first (``ranking.best`` is the choice)."""

    scenario: str
    ranking: Ranking


def rank_tap(scenario: str, overrides: Sequence[str] = ()) -> TapRanking:
    """Rank TAP's (H, B) candidates as a run does before its first step, with both knobs
    ``auto``: the same first window, pools, cost model and memory check (see
    :mod:`libra_des.sim.training.tap_autotune`). Fixed knobs in the scenario are ignored:
    the ranking covers the whole grid. Training scenarios whose policy runs TAP only."""
    import numpy as np

    from libra_des.plan.balancers.registry import get as training_balancer
    from libra_des.plan.balancers.registry import tap_users
    from libra_des.sim.training.simulator import choose_tap_knobs, elaborate_cluster, first_window

    sc = load_training(scenario, [*overrides, "balancer.heads_split=auto",
                                  "balancer.block_size=auto"], "TAP knobs belong to training runs")
    if not training_balancer(sc.balancer.policy).runs_tap:
        tap = " | ".join(tap_users())
        raise InputError("balancer.policy", sc.balancer.policy, f"{tap} (they run TAP)")
    cluster_rng, data_rng, _ = np.random.default_rng(sc.seed).spawn(3)
    cluster = elaborate_cluster(sc, cluster_rng)
    _, ranking = choose_tap_knobs(sc, cluster, first_window(sc, data_rng))
    if ranking is None:  # both knobs are auto and the policy runs TAP: a ranking is made
        raise AssertionError("choose_tap_knobs ranked nothing with both knobs auto")
    return TapRanking(sc.name, ranking)
