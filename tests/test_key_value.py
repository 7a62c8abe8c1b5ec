"""``--set`` and ``--grid`` take KEY=VALUE as one word; two words get a line that says so."""

from __future__ import annotations

import pytest

from tests.test_contract import one_line_error


@pytest.mark.parametrize("argv", [
    ["run", "scenarios/quickstart.yaml", "--set", "parallelism.dp", "4"],
    ["sweep", "scenarios/quickstart.yaml", "--grid", "parallelism.dp", "1,2"],
    ["scenario", "show", "scenarios/quickstart.yaml", "--set", "parallelism.dp"],
])
def test_a_key_and_value_as_two_words_names_the_form(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    line = one_line_error(capsys, argv)
    assert "KEY=VALUE as one word" in line and "parallelism.dp" in line
