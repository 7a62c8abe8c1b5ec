"""The report as one to present: rounded numbers with units, the speed-up the terminal prints,
titled figures in distinct colours, sweep lines and heatmaps, the built-in published tables."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from figure_checks import Figures, check_figure

from libra_des.cli import main
from libra_des.config import ROOT
from libra_des.errors import InputError
from libra_des.report import published
from libra_des.report.numbers import show, unit_of

QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"
MOE = str(ROOT / "scenarios" / "paper-moe-breakdown.yaml")
TINY = ["--set", "parallelism.dp=2", "--set", "parallelism.pp=2", "--set",
        "parallelism.gbs=8", "--set", "balancer.pool_size=2", "--set", "model.layers=2"]
TINY_MOE = ["--set", "model.layers=2", "--set", "workload.batches=1", "--set",
            "workload.seq_len=128"]
MODEL_DOC = ROOT / "docs" / "model.md"  # the in-repo account of the papers the values cite


@pytest.mark.parametrize(("value", "dotted", "text"), [
    (0.00159636, "moe_layer_s", "1.60 ms"),
    (10.0099, "step_time_s.mean", "10.0 s"),
    (2.29e-5, "layer_breakdown_s.combine.exposed", "22.9 µs"),
    (792252.39, "tokens_per_s", "792k tokens/s"),
    (1.35e6, "prefill_tokens_per_s", "1.35M tokens/s"),
    (0.169623, "mfu", "17.0 %"),
    (0.24063, "bubble_fraction", "24.1 %"),
    (1.95725e-17, "comm_hidden_fraction", "0.00 %"),
    (1.2431640625, "imbalance_ratio.mean", "1.24"),
    (26.766, "peak_memory_gib", "26.8 GiB"),
    (4.8e12, "peaks.hbm_bytes_per_s", "4.80 TB/s"),
    (38, "events", "38"),
    (1.5, "mfu", "n/a"),                   # impossible: never shown as a number
    (-0.2, "pool_wait_fraction", "n/a"),
    (math.nan, "step_time_s.mean", "n/a"),
])
def test_numbers_are_rounded_with_units(value: float, dotted: str, text: str) -> None:
    assert show(value, dotted) == text


def test_units_follow_the_result_contract() -> None:
    assert unit_of("ttft_s.p99") == "s" and unit_of("replica_waste_fraction") == "share"
    assert unit_of("predictor_accuracy") == "share" and unit_of("gpus") == ""


def test_every_kind_has_a_speedup_rule() -> None:
    from libra_des import kinds
    from libra_des.report.headline import SPEEDUP

    assert set(SPEEDUP) == set(kinds.names())
    for name, (metric, _, _) in SPEEDUP.items():
        assert unit_of(metric) == "s", name  # a time: lower is better


@pytest.fixture(scope="module")
def quickstart_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("qs")
    assert main(["quickstart", "--out", str(out), *TINY]) == 0
    return out


def test_quickstart_report_has_the_terminal_speedup_and_figures(quickstart_dir: Path) -> None:
    pytest.importorskip("matplotlib")
    libra, ulysses = (json.loads((quickstart_dir / p / "result.json").read_text())
                      for p in ("libra", "ulysses"))
    speedup = ulysses["step_time_s"]["mean"] / libra["step_time_s"]["mean"]
    text = (quickstart_dir / "report.html").read_text()
    assert "step-time speed-up over ulysses" in text
    assert f"<b>{speedup:.3g}×</b>" in text or f"<b>{speedup:.2f}×</b>" in text
    assert text.count('src="data:image/png;base64,') >= 3  # make run's page has figures
    long_numbers = re.findall(r"<td[^>]*>-?\d+\.\d{4,}", text)
    assert not long_numbers, long_numbers[:3]  # nothing like 0.00159636 in any cell


@pytest.fixture(scope="module")
def moe_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two axes (system x batch) of the paper MoE scenario: lines, a heatmap, the paper's
    table and the speed-up over SGLang."""
    out = tmp_path_factory.mktemp("moe-sweep")
    assert main(["sweep", MOE, *TINY_MOE, "--grid", "balancer.policy=sglang,libra",
                 "--grid", "workload.batch=2,4", "--out", str(out), "--workers", "1"]) == 0
    return out


def test_every_report_figure_has_a_title_and_distinct_colours(
        quickstart_dir: Path, moe_sweep: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    figs = Figures(monkeypatch)
    moe_runs = tmp_path / "moe-runs"
    for policy in ("sglang", "libra"):
        assert main(["run", MOE, *TINY_MOE, "--set", f"balancer.policy={policy}",
                     "--out", str(moe_runs / policy), "--json"]) == 0
    capsys.readouterr()
    for folder in (quickstart_dir, quickstart_dir / "libra", moe_runs, moe_sweep):
        assert main(["report", str(folder), "--out", str(tmp_path / "r.html")]) == 0
    assert len(figs.drawn) >= 3 + 3 + 2 + 3, [c for _, c in figs.drawn]
    for fig, caption in figs.drawn:
        check_figure(fig, caption)


def test_sweep_report_draws_lines_and_a_heatmap_not_bars(
        moe_sweep: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.container import BarContainer

    figs = Figures(monkeypatch)
    page = tmp_path / "s.html"
    assert main(["report", str(moe_sweep), "--out", str(page)]) == 0
    captions = [c for _, c in figs.drawn]
    heatmaps = [c for c in captions if "over the two swept axes" in c]
    faceted = [(f, c) for f, c in figs.drawn if "against each swept axis" in c]
    assert heatmaps and len(heatmaps) == len(faceted), captions  # one of each per metric
    for fig, _ in figs.drawn:
        assert not any(isinstance(c, BarContainer) for ax in fig.axes for c in ax.containers)
    for fig, caption in faceted:
        panels = [ax for ax in fig.axes if ax.get_lines()]
        assert [ax.get_xlabel() for ax in panels] == ["policy", "batch"], caption
        assert all(len(ax.get_lines()) == 2 for ax in panels)  # one per other-axis value
        policy = panels[0].get_lines()
        assert all(line.get_linestyle() == "None" for line in policy)  # categorical: dots
        assert all(line.get_linestyle() == "-" for line in panels[1].get_lines())
        sizes = [line.get_markersize() for ax in panels for line in ax.get_lines()[:2]]
        assert sizes[0] > sizes[1]  # a later series drawn smaller: coinciding ones both show
    text = page.read_text()
    assert "prefill-time speed-up over sglang" in text and "1.00×" in text


def test_paper_scenarios_ship_published_values() -> None:
    papers = sorted((ROOT / "scenarios").glob("paper-*.yaml"))
    assert papers
    text = MODEL_DOC.read_text()
    for scenario in papers:
        path = published.reference_file(scenario.stem)
        assert path is not None, scenario.stem
        data = published.load_paper(path)
        assert data["scenario"] == scenario.stem
        for entry in data["values"]:
            assert entry["source"]["paper"] and "docs/model.md" in entry["source"]["via"]
            numbers = [entry["value"]] if "value" in entry else entry["range"]
            assert published.UNITS[entry["unit"]] == unit_of(entry["metric"])
            for v in numbers:  # each value as docs/model.md writes it (a share as per cent)
                written = {f"{v}", f"{v:.4f}", f"{v * 100:.1f}%", f"{v * 100:.1f}"}
                assert any(w in text for w in written), (scenario.stem, v)


def test_paper_run_shows_simulated_published_and_ratio(moe_sweep: Path, tmp_path: Path) -> None:
    page = tmp_path / "p.html"
    assert main(["report", str(moe_sweep), "--out", str(page)]) == 0
    text = page.read_text()
    assert "Simulated against published: paper-moe-breakdown" in text
    assert "86.5 % – 91.7 %" in text and "× (" in text  # published range and the ratio
    assert "missing: no run with balancer.policy=lina" in text  # says when one is missing
    assert "docs/model.md" in text and "PAPERS.md" not in text


def test_impossible_published_value_is_bad_input(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "paper-x.yaml"
    bad.write_text("scenario: paper-x\nvalues:\n  - metric: bubble_fraction\n    value: 1.7\n"
                   "    unit: fraction\n    source: {paper: p, via: v}\n")
    monkeypatch.setattr(published, "REFERENCES", tmp_path)
    path = published.reference_file("paper-x")
    assert path == bad
    with pytest.raises(InputError, match="bubble_fraction"):
        published.load_paper(path)
    bad.write_text("scenario: paper-x\nvalues: []\n")
    with pytest.raises(InputError, match="note"):
        published.load_paper(bad)
    assert published.reference_file("../etc/paper-x") is None


def test_published_values_cite_docs_the_repository_ships() -> None:
    """A published value's trail ends in a file a user has: every path a built-in reference
    file names (``docs/model.md``, ``scenarios/...``) exists in the repository."""
    files = sorted((ROOT / "docs" / "references").glob("*.yaml"))
    assert files
    for path in files:
        cited = re.findall(r"(?:\.\./)*[\w.-]+(?:/[\w.-]+)+\.(?:md|yaml)", path.read_text())
        assert cited, path.name
        for name in cited:
            inside = not name.startswith("../") and (ROOT / name).is_file()
            assert inside, f"{path.name} cites {name}, not in the repository"


def test_a_stacked_bar_keeps_every_stage_in_an_other_part() -> None:
    """More parts than colours: the largest keep their own colour, the rest are summed into
    'other', and every bar still adds up to its whole."""
    from libra_des.report.figures import OTHER, PALETTE, top_parts

    series = {f"stage {i}": [float(i), 2.0 * i] for i in range(20)}
    parts = top_parts(series)
    assert len(parts) == len(PALETTE) and OTHER in parts
    for col in range(2):
        assert math.fsum(v[col] for v in parts.values()) == math.fsum(
            v[col] for v in series.values())
    assert "stage 19" in parts and "stage 0" not in parts  # the smallest went to 'other'
    assert top_parts({"a": [1.0]}) == {"a": [1.0]}


def test_heatmap_labels_follow_cell_luminance() -> None:
    from libra_des.report.figures import DARK_LUMINANCE, luminance

    assert luminance((0, 0, 0, 1)) == 0 and luminance((1, 1, 1, 1)) == pytest.approx(1)
    assert luminance((0.0, 0.13, 0.3)) < DARK_LUMINANCE < luminance((1.0, 0.92, 0.27))


def test_sweep_table_shows_the_speedup_right_after_the_axes(moe_sweep: Path,
                                                             tmp_path: Path) -> None:
    """The column a reader looks for first stays on screen however many metrics follow."""
    page = tmp_path / "s.html"
    assert main(["report", str(moe_sweep), "--out", str(page)]) == 0
    heads = [re.findall(r"<th[^>]*>([^<]*)</th>", t) for t in
             re.findall(r"<thead>(.*?)</thead>", page.read_text())]
    sweep = next(h for h in heads if "prefill-time speed-up over sglang" in h)
    assert sweep[:3] == ["balancer.policy", "workload.batch", "prefill-time speed-up over sglang"]
    assert len(sweep) > 4  # the metrics follow it
