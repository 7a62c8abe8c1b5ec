"""``libra-des scenario copy NAME DIR`` (:func:`libra_des.api.copy_scenario`): a shipped
scenario copied to edit, loading from its new folder as the shipped file does, under the
output-folder policy."""

from __future__ import annotations

from pathlib import Path

import pytest

import libra_des.api as api
from libra_des.cli import main
from libra_des.config import ROOT
from libra_des.errors import InputError


def bad(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    return err


@pytest.mark.parametrize("name", sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml")))
def test_every_shipped_scenario_copies_and_loads_as_shipped(name: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    monkeypatch.chdir(tmp_path)  # no repository folders around: shipped names must resolve
    path = api.copy_scenario(name, "mine")
    assert path == Path("mine") / f"{name}.yaml"
    assert path.read_bytes() == (ROOT / "scenarios" / f"{name}.yaml").read_bytes()
    assert api.load_scenario(path) == api.load_scenario(ROOT / "scenarios" / f"{name}.yaml")


def test_the_command_copies_and_refuses_to_overwrite(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["scenario", "copy", "quickstart", "mine"]) == 0
    assert "mine/quickstart.yaml" in capsys.readouterr().out
    assert main(["scenario", "copy", "quickstart", "mine"]) == 0  # ours, unchanged: replaced
    capsys.readouterr()
    edited = Path("mine/quickstart.yaml")
    edited.write_text(edited.read_text().replace("steps: 1", "steps: 2"))
    assert "a file libra-des wrote and nobody changed" in bad(
        capsys, "scenario", "copy", "quickstart", "mine")
    assert "steps: 2" in edited.read_text()  # the user's edit survives
    Path("theirs").mkdir()
    Path("theirs/notes.txt").write_text("mine")
    assert "manifest" in bad(capsys, "scenario", "copy", "quickstart", "theirs")
    assert sorted(p.name for p in Path("theirs").iterdir()) == ["notes.txt"]
    assert "a shipped scenario name" in bad(capsys, "scenario", "copy", "quickstrat", "new")
    assert not Path("new").exists()  # refused before anything is written


def test_a_path_is_not_a_shipped_name(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        api.copy_scenario(str(ROOT / "scenarios" / "quickstart.yaml"), tmp_path / "out")
