"""Hardware-layer errors name model fields; commands map them to the flags the user typed."""

from __future__ import annotations

import pytest

from libra_des.cli import main
from libra_des.errors import InputError
from libra_des.hardware.costs import CostModel
from libra_des.hardware.fabric.topology import load_topology
from libra_des.hardware.profiles.profile import load_profile


def model() -> CostModel:
    fabric = load_topology("h200-roce-railopt", {"nodes": 2}).fabric()
    return CostModel(load_profile("h200-sxm"), fabric)


def test_cost_model_names_its_arguments() -> None:
    with pytest.raises(InputError) as err:
        model().collective("all_reduce", -1.0, 16)
    assert err.value.field == "nbytes"
    with pytest.raises(InputError) as err:
        model().collective("all_reduce", 1e6, 16, None, "no_such_algorithm")
    assert err.value.field == "algorithm"


def test_renamed_keeps_value_and_allowed() -> None:
    exc = InputError("nbytes", -1, "bytes >= 0")
    out = exc.renamed({"nbytes": "--bytes"})
    assert (out.field, out.value, out.allowed) == ("--bytes", -1, "bytes >= 0")
    assert exc.renamed({"other": "--x"}) is exc


def test_cost_command_names_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["cost", "--op", "all_reduce", "--group", "16", "--bytes", "1e6",
                 "--algorithm", "no_such_algorithm"])
    line = capsys.readouterr().err.strip()
    assert code == 2
    assert line.startswith("error: --algorithm: got 'no_such_algorithm'")
