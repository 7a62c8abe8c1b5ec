"""CPU stages priced as the systems run them: operation counts times a compiled per-operation
cost on a stated server CPU, never a timing of this project's numpy code."""

from __future__ import annotations

import pytest

from libra_des.sim.moe import cpu


def test_stage_defaults_name_their_provenance_and_cpu() -> None:
    for stage in ("sharding_cpu", "replication_cpu", "prediction_cpu"):
        src = cpu.CPU_SOURCES[stage]
        assert src.provenance in {"own_implementation", "borrowed"}
        assert cpu.SERVER_CPU in src.source and "numba" in src.source
    # The numpy-on-the-CI-host constants are gone.
    for name in ("CPU_BASE_S", "CPU_PER_ITERATION_S", "REPLICATION_PER_STEP_CELL_S",
                 "LINA_LOOKUP_PER_TOKEN_S"):
        assert not hasattr(cpu, name)
    assert pytest.approx(cpu.CYCLES_PER_OP / (cpu.SERVER_GHZ * 1e9)) == cpu.SECONDS_PER_OP
    # Published stage times are calibration points only, each with its hardware.
    for stage, _system, seconds, hardware, source in cpu.PUBLISHED_STAGE_TIMES:
        assert seconds > 0 and hardware and source and stage in cpu.CPU_SOURCES


def test_operation_counts_in_closed_form() -> None:
    g, e = 8, 128
    assert cpu.sharding_ops(g, e, 0) == g * e
    assert cpu.sharding_ops(g, e, 10) - cpu.sharding_ops(g, e, 9) == 2 * g + e
    assert cpu.replication_ops(g, e, 64) == g * e + 64 * (2 * g + e)
    # Lina's lookup: the previous layer's expert histogram, then histogram x [E, E] table.
    assert cpu.lookup_ops(1000, e, 8) == 1000 * 8 + e * e
    step = cpu.lookup_seconds(2000, e, 8) - cpu.lookup_seconds(1000, e, 8)
    assert step == pytest.approx(cpu.SECONDS_PER_OP * 1000 * 8)
    assert cpu.sharding_seconds(10, g, e) == pytest.approx(
        cpu.SECONDS_PER_OP * cpu.sharding_ops(g, e, 10))
