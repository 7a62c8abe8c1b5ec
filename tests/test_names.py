"""Shipped scenarios run by name from any folder; a name that is nowhere gets the closest
shipped names (scenario, model, topology)."""

from __future__ import annotations

from pathlib import Path

import pytest

import libra_des
from tests.test_contract import one_line_error


def test_a_shipped_scenario_loads_by_name_from_an_empty_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    by_name = libra_des.load_scenario("quickstart")
    by_path = libra_des.load_scenario(Path(__file__).parents[1] / "scenarios/quickstart.yaml")
    assert by_name == by_path


def test_a_file_in_the_folder_wins_over_the_shipped_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    shipped = (Path(__file__).parents[1] / "scenarios/quickstart.yaml").read_text()
    (tmp_path / "quickstart").write_text(shipped.replace("name: quickstart", "name: mine"))
    assert libra_des.load_scenario("quickstart").name == "mine"


@pytest.mark.parametrize(("argv", "hint"), [
    (["run", "quickstar"], "did you mean 'quickstart'?"),
    (["run", "quickstart", "--set", "model=qwen3-30b-a3"], "did you mean 'qwen3-30b-a3b'"),
    (["run", "quickstart", "--set", "topology=h200-roce-railop"],
     "did you mean 'h200-roce-railopt'"),
])
def test_a_near_miss_names_the_closest_shipped_names(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], hint: str
) -> None:
    line = one_line_error(capsys, [*argv, "--out", str(tmp_path / "out")])
    assert hint in line


def test_scenario_show_takes_a_shipped_name_from_an_empty_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from libra_des.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["scenario", "show", "quickstart", "--json"]) == 0
    assert '"field": "parallelism.dp"' in capsys.readouterr().out
