"""Scenario description: YAML in, frozen validated objects out (the configuration's face).

The loading steps and the models ``libra-des plan`` validates on their own (model shape,
workload) are in :mod:`libra_des.config.loading`, re-exported here; the whole-scenario models
and ``load_scenario`` are in :mod:`libra_des.config.scenario`, importable from here too,
imported on first use (building them is work a command that never loads a scenario need not
pay). Neither module imports this one, so the face sits above both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from libra_des.config.loading import (
    MOE_DATASETS as MOE_DATASETS,
)
from libra_des.config.loading import (
    ROOT as ROOT,
)
from libra_des.config.loading import (
    Frozen as Frozen,
)
from libra_des.config.loading import (
    KeyReaders as KeyReaders,
)
from libra_des.config.loading import (
    LengthDist as LengthDist,
)
from libra_des.config.loading import (
    MixtureComponent as MixtureComponent,
)
from libra_des.config.loading import (
    ModelSpec as ModelSpec,
)
from libra_des.config.loading import (
    MoeWorkload as MoeWorkload,
)
from libra_des.config.loading import (
    RoutingSpec as RoutingSpec,
)
from libra_des.config.loading import (
    TrainingWorkload as TrainingWorkload,
)
from libra_des.config.loading import (
    WorkloadBase as WorkloadBase,
)
from libra_des.config.loading import (
    WorkloadSpec as WorkloadSpec,
)
from libra_des.config.loading import (
    apply_overrides as apply_overrides,
)
from libra_des.config.loading import (
    elaborate as elaborate,
)
from libra_des.config.loading import (
    include as include,
)
from libra_des.config.loading import (
    load_workload as load_workload,
)
from libra_des.config.loading import (
    not_found as not_found,
)
from libra_des.config.loading import (
    parse_override as parse_override,
)
from libra_des.config.loading import (
    pydantic_line as pydantic_line,
)
from libra_des.config.loading import (
    read_yaml as read_yaml,
)
from libra_des.config.loading import (
    resolve_length_paths as resolve_length_paths,
)
from libra_des.config.loading import (
    resolve_path as resolve_path,
)
from libra_des.config.loading import (
    shipped_names as shipped_names,
)
from libra_des.config.loading import (
    shipped_scenario as shipped_scenario,
)
from libra_des.config.loading import (
    unknown_key as unknown_key,
)
from libra_des.config.loading import (
    validate as validate,
)

if TYPE_CHECKING:
    from libra_des.config.scenario import DEFAULT_KIND as DEFAULT_KIND
    from libra_des.config.scenario import SCENARIO_KINDS as SCENARIO_KINDS
    from libra_des.config.scenario import Balancer as Balancer
    from libra_des.config.scenario import MemorySpec as MemorySpec
    from libra_des.config.scenario import MoeBalancerSpec as MoeBalancerSpec
    from libra_des.config.scenario import MoeParallelism as MoeParallelism
    from libra_des.config.scenario import MoeScenario as MoeScenario
    from libra_des.config.scenario import NetworkSpec as NetworkSpec
    from libra_des.config.scenario import Parallelism as Parallelism
    from libra_des.config.scenario import Scenario as Scenario
    from libra_des.config.scenario import ScenarioBase as ScenarioBase
    from libra_des.config.scenario import TrainingBalancerSpec as TrainingBalancerSpec
    from libra_des.config.scenario import TrainingParallelism as TrainingParallelism
    from libra_des.config.scenario import TrainingScenario as TrainingScenario
    from libra_des.config.scenario import UnresolvedBalancerSpec as UnresolvedBalancerSpec
    from libra_des.config.scenario import VarianceSpec as VarianceSpec
    from libra_des.config.scenario import check_tap_knobs as check_tap_knobs
    from libra_des.config.scenario import key_kinds as key_kinds
    from libra_des.config.scenario import load_scenario as load_scenario
    from libra_des.config.scenario import require_training as require_training
    from libra_des.config.scenario import scenario_dict as scenario_dict
    from libra_des.config.scenario import validate_scenario as validate_scenario

#: Names defined in :mod:`libra_des.config.scenario` and importable from here (on first use,
#: PEP 562):
#: the scenario models are built only by a command that loads a scenario.
SCENARIO_NAMES = frozenset({
    "DEFAULT_KIND", "SCENARIO_KINDS", "Balancer", "CommSpec", "MemorySpec", "MoeBalancerSpec",
    "MoeModelSpec", "MoeParallelism", "MoeScenario", "NetworkSpec", "OverlapSpec", "Parallelism",
    "Scenario", "ScenarioBase", "TrainingBalancerSpec", "TrainingParallelism", "TrainingScenario",
    "VarianceSpec", "UnresolvedBalancerSpec", "check_tap_knobs", "key_kinds", "load_scenario",
    "require_training", "scenario_dict", "validate_scenario",
})


def __getattr__(name: str) -> Any:
    """A scenario model or function of :mod:`libra_des.config.scenario`, imported on first use."""
    if name not in SCENARIO_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from libra_des.config import scenario

    return getattr(scenario, name)
