"""Chakra execution traces: replay imported ones on a modelled fabric (``libra-des import
chakra``), export a simulated training step as one (``libra-des run --chakra``).

The model is :mod:`libra_des.sim.chakra.replay`'s; every function imports it inside its body.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from libra_des.errors import InputError

if TYPE_CHECKING:
    from libra_des.config import Scenario

__all__ = ["ChakraReplay", "check_chakra_export", "export_chakra", "replay_chakra"]


@dataclass(frozen=True)
class ChakraReplay:
    """Imported traces replayed: how many ranks, on which topology, and the totals
    (``step_s``, ``compute_s``, ``comm_s``, ``collective_bytes`` per op, ``p2p_bytes``, and
    ``warnings`` when the profile was borrowed from another GPU)."""

    ranks: int
    topology: str
    totals: dict[str, Any]


def replay_chakra(traces: list[Path], topology: str, profile: str | None = None,
                  scope: str = "own") -> ChakraReplay:
    """Replay ``.et`` files (or folders of them) on ``topology``, grown to as many nodes as
    the ranks need, priced by ``profile`` (default: the shipped H200 SXM). ``scope``
    ``borrowed`` accepts a profile measured on another GPU, with a warning."""
    from libra_des.hardware.costs import CostModel
    from libra_des.hardware.fabric.topology import load_topology
    from libra_des.hardware.profiles.profile import check_device, load_profile
    from libra_des.sim.chakra.files import read_inputs
    from libra_des.sim.chakra.replay import replay

    ranks, groups = read_inputs(traces)
    topo = load_topology(topology)
    if topo.num_gpus < len(ranks):
        topo = load_topology(topology, {"nodes": -(-len(ranks) // topo.gpus_per_node)})
    prof = load_profile(profile)
    warning = check_device(prof, topo.spec.gpu, scope, profile) if profile else None
    totals = replay(ranks, groups, CostModel(prof, topo.fabric()))
    if warning:
        totals["warnings"] = [warning]
    return ChakraReplay(len(ranks), topo.spec.name, totals)


def check_chakra_export(scenario: Scenario, out: Path, flag: str = "--chakra",
                        trace_ranks: str | None = None) -> None:
    """A Chakra export takes training steps only, into a writable folder (checked before any
    work): it reads the training trace's layout (``results/trace.py``). It writes every rank
    (an importer needs ranks 0..N-1 and every member of each group), so ``--trace-ranks``,
    which would select some rank groups, is refused with it."""
    from libra_des.config import TrainingScenario
    from libra_des.sim.chakra.files import check_folder

    if not isinstance(scenario, TrainingScenario):
        raise InputError(flag, scenario.kind, "a training scenario")
    if trace_ranks is not None:
        raise InputError("--trace-ranks", trace_ranks, f"no rank selection with {flag} (the "
                         "export writes every rank)")
    check_folder(out, flag)


def export_chakra(trace: dict[str, Any], out: Path) -> list[Path]:
    """Write a training run's Chrome trace as Chakra ET, one file per rank, and its comm
    groups, into ``out``; the files written."""
    from libra_des.sim.chakra.export import export
    from libra_des.sim.chakra.files import write_folder

    files, groups = export(trace)
    return write_folder(out, files, groups)
