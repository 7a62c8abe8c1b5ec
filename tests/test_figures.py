"""``libra-des figs``: every figure drawn (test-only tiny mode), PNG + PDF + CSV, captions."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from figure_checks import Figures, check_figure

from libra_des.cli import main

pytest.importorskip("matplotlib")

MIN_FIGURES = 16


CAPTURED: list[tuple[Any, str]] = []  # every figure the drawing below made, before encoding


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("figs")
    with pytest.MonkeyPatch.context() as patch:
        figs = Figures(patch)
        assert main(["figs", "--tiny", "--out", str(out), "--workers", "1"]) == 0
    CAPTURED[:] = figs.drawn
    return out


def test_every_figure_reads(drawn: Path) -> None:
    """Titles, no two series in one colour, no legend over any axes (figure_checks.py)."""
    from paper_figs.catalog import NAMES

    assert len(CAPTURED) == len(NAMES)
    for fig, caption in CAPTURED:
        check_figure(fig, caption)


def test_every_figure_has_png_pdf_and_csv(drawn: Path) -> None:
    from paper_figs.catalog import NAMES

    index = json.loads((drawn / "figures.json").read_text())
    assert [f["name"] for f in index["figures"]] == list(NAMES)
    assert len(NAMES) >= MIN_FIGURES
    for name in NAMES:
        assert (drawn / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert (drawn / f"{name}.pdf").read_bytes()[:5] == b"%PDF-", name
        with (drawn / f"{name}.csv").open() as fh:
            rows = list(csv.DictReader(fh))
        assert rows, name
    for fig in index["figures"]:
        assert "seeds" in fig["caption"] and "fidelity" in fig["caption"], fig


def test_csv_holds_the_plotted_numbers(drawn: Path) -> None:
    """dp_scaling's CSV equals the sweep's own tokens/s per (variant, DP) point."""
    sweep = json.loads((drawn / "data" / "dp_scaling-tiny" / "sweep.json").read_text())
    simulated = {(p["overrides"]["balancer.policy"], p["overrides"]["parallelism.dp"]):
                 p["metrics"]["tokens_per_s"] for p in sweep["points"]}
    policy = {"Ulysses": "ulysses", "Libra Full": "libra"}
    with (drawn / "dp_scaling.csv").open() as fh:
        rows = [r for r in csv.DictReader(fh) if r["variant"] in policy]
    assert rows
    for r in rows:
        assert float(r["tokens_per_s"]) == pytest.approx(
            simulated[(policy[r["variant"]], int(r["dp"]))], rel=1e-12)
        assert float(r["scaling_efficiency"]) > 0


def test_only_and_bad_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["figs", "--tiny", "--only", "noise_spread", "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.glob("noise_spread.*")) == [
        "noise_spread.csv", "noise_spread.pdf", "noise_spread.png"]
    capsys.readouterr()
    assert main(["figs", "--only", "nope", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error: --only: got 'nope'; allowed:")


def test_missing_matplotlib_is_one_line(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['matplotlib'] = None; from libra_des.cli import main; "
            f"sys.exit(main(['figs', '--out', {str(tmp_path)!r}]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "libra-des[figs]" in done.stderr


def test_core_never_imports_matplotlib() -> None:
    code = ("import sys, libra_des.cli, libra_des.runs.sweep, libra_des.commands.run, "
            "libra_des.commands.figs; from libra_des.cli import build_parser; build_parser(); "
            "sys.exit('matplotlib' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_a_cut_model_is_never_titled_as_the_whole(drawn: Path) -> None:
    """Tiny mode simulates 2 of a model's layers: every figure whose title names the model
    says it was cut, and every MoE caption says how much of it ran."""
    from paper_figs.common import full_layers

    full = full_layers("paper-moe-breakdown")
    named = [(fig, caption) for fig, caption in CAPTURED if "Qwen3" in fig.get_suptitle()]
    assert len(named) >= 5
    for fig, caption in named:
        assert re.search(r"Qwen3-[\w-]+ cut to 2 of \d+ layers", fig.get_suptitle()), caption
    index = json.loads((drawn / "figures.json").read_text())
    assert all(f"of {full} layers" in f["caption"] for f in index["figures"]
               if f["name"].startswith("moe_") and f["name"] != "moe_hiding")
