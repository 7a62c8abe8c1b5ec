"""Every number a person reads comes from one formatter (:mod:`libra_des.base.numbers`):
three significant digits with a unit. The commands' terminal output holds no raw float (more
than four significant digits, or a bare exponent); ``--json`` keeps every digit."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from libra_des.base.numbers import plain, sig3, with_unit
from libra_des.cli import main
from tests.test_chakra import two_ranks

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"
TINY = ["parallelism.dp=2", "parallelism.pp=1", "parallelism.gbs=4", "balancer.pool_size=2",
        "model.layers=2", "steps=1"]
#: A decimal number standing alone (not inside a path, a hash or a version).
DECIMAL = re.compile(r"(?<![\w.\-/])(\d+\.\d+)(?![\w.]*[/\w])")
#: An exponent as Python's ``g``/``e`` formats write it.
EXPONENT = re.compile(r"\d+(?:\.\d+)?[eE][+-]\d+")


def raw_floats(text: str) -> list[str]:
    """The numbers of ``text`` with more than four significant digits, and bare exponents."""
    found = EXPONENT.findall(text)
    for number in DECIMAL.findall(text):
        digits = number.replace(".", "").lstrip("0")
        if len(digits) > 4:
            found.append(number)
    return found


def test_the_detector_finds_what_the_old_output_printed() -> None:
    assert raw_floats("step 266.8481 rate 9.428e+05 moe_layer_s 0.00757563") == [
        "9.428e+05", "266.8481", "0.00757563"]
    assert raw_floats("267 s, 943k tokens/s, 24.1 %, 1.60 ms, v0.3.10") == []


@pytest.mark.parametrize(("value", "unit", "text"), [
    (266.8481, "s", "267 s"), (0.00757563, "s", "7.58 ms"), (9.428e5, "tokens/s", "943k tokens/s"),
    (0.24137, "share", "24.1 %"), (1.5e9, "B", "1.50 GB"), (2.5, "x", "2.50×"),
    (9.428e5, "", "943k"), (1234.5, "", "1230"), (1.234e7, "", "12.3M"),
    (0.012345, "", "0.0123"), (0.0, "s", "0 s"),
])
def test_one_formatter(value: float, unit: str, text: str) -> None:
    assert with_unit(value, unit) == text


def test_plain_numbers_need_no_exponent_below_a_quadrillion() -> None:
    assert "e" not in plain(4.2e14) and plain(4.2e14) == "420T"
    assert sig3(1234.5) == "1230"


def terminal(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 0
    got = capsys.readouterr()
    return got.out + got.err


def test_commands_print_no_raw_floats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sets = [a for s in TINY for a in ("--set", s)]
    outputs = {
        "run": terminal(capsys, ["run", str(QUICKSTART), *sets, "--out", str(tmp_path / "r")]),
        "sweep": terminal(capsys, ["sweep", str(QUICKSTART), *sets, "--out",
                                   str(tmp_path / "s"), "--workers", "1", "--zip",
                                   "balancer.policy=ulysses,libra"]),
        "cost": terminal(capsys, ["cost", "--op", "all_reduce", "--bytes", "8388608",
                                  "--group", "4"]),
        "cost sizes": terminal(capsys, ["cost", "--op", "all_reduce", "--group", "8"]),
        "gemm": terminal(capsys, ["cost", "--op", "gemm", "--m", "4096", "--n", "4096",
                                  "--k", "4096"]),
        "import": terminal(capsys, ["import", "chakra", str(two_ranks(tmp_path / "et"))]),
    }
    for name, text in outputs.items():
        assert text.strip(), name
        assert raw_floats(text) == [], (name, text)


def test_json_keeps_every_digit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--json`` is for machines: the same float as the replay computes, not a rounded one."""
    folder = two_ranks(tmp_path / "et")
    got = json.loads(terminal(capsys, ["import", "chakra", str(folder), "--json"]))
    assert got["step_s"] != float(sig3(got["step_s"]))


def test_tables_fit_80_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    """An 80-column terminal gets whole cells: the spare columns go, the rest fold."""
    monkeypatch.setenv("COLUMNS", "80")
    sets = [a for s in TINY for a in ("--set", s)]
    outputs = [
        terminal(capsys, ["sweep", str(QUICKSTART), *sets, "--out", str(tmp_path / "s"),
                          "--workers", "1", "--zip",
                          "balancer.policy=ulysses,libra;balancer.vrsp=false,true"]),
        terminal(capsys, ["run", str(QUICKSTART), *sets, "--out", str(tmp_path / "r")]),
        terminal(capsys, ["plan", "--workload", "longctx-256k", "--gbs", "16", "--windows", "1",
                          "--pool-size", "2", "--policy", "vrsp,zigzag_swap"]),
        terminal(capsys, ["scenario", "show", str(QUICKSTART)]),
    ]
    for text in outputs:
        assert "…" not in text, text
        assert max(len(line) for line in text.splitlines()) <= 80, text
    assert "ulysses" in outputs[0] and "tokens/s" in outputs[0] and "zigzag_swap" in outputs[2]


def test_fit_drops_spare_columns_first() -> None:
    from rich.console import Console
    from rich.table import Table

    from libra_des.commands.tables import fit

    table = Table()
    for name in ("keep", "spare", "also"):
        table.add_column(name)
    table.add_row("a" * 30, "b" * 30, "c" * 30)
    console = Console(width=80, file=open("/dev/null", "w"))  # noqa: SIM115
    fitted = fit(table, console, ("spare",))
    assert [c.header for c in fitted.columns] == ["keep", "also"]
    with console.capture() as got:
        console.print(fitted)
    assert "a" * 30 in got.get() and "…" not in got.get()
