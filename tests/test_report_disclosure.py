"""What a page must not hide: warnings, OOM, a borrowed profile, fidelity notes (per run and
per sweep point), the scenario summary, the timeline; the spread over seeds; the model band."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from libra_des.cli import main
from libra_des.hardware.profiles.profile import load_profile
from libra_des.kinds.training import METRICS
from libra_des.results.spread import derive_seeds, paired_ratio
from libra_des.results.uncertainty import model_band

SCENARIO = str(Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.yaml")
TINY = ["--set", "parallelism.dp=2", "--set", "parallelism.pp=2", "--set",
        "parallelism.gbs=8", "--set", "balancer.pool_size=2", "--set", "model.layers=2"]
#: An H100 profile on the H200 topology, memory cut to 5 % so the run overflows, and let run.
BORROWED_OOM = ["--set", "profile=h100-sxm", "--set", "profile_scope=borrowed", "--set",
                "memory.check=warn", "--set", "memory.usable_fraction=0.05"]
#: One node per pipeline stage under 4:1 leaves of 32 nodes: fast fidelity warns.
FAST_WARNS = ["--set", "parallelism.cp=4", "--set",
              "topology_params={nodes: 32, levels.1.oversubscription: 4}"]


def report(folder: Path, page: Path) -> str:
    assert main(["report", str(folder), "--out", str(page)]) == 0
    return page.read_text()


@pytest.fixture(scope="module")
def oom_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("oom")
    assert main(["run", SCENARIO, *TINY, *BORROWED_OOM, "--trace", "--out", str(out),
                 "--json"]) == 0
    return out


def test_borrowed_oom_run_page_shows_the_box_summary_and_timeline(oom_run: Path,
                                                                   tmp_path: Path) -> None:
    result = json.loads((oom_run / "result.json").read_text())
    assert result["oom"] is True and result["warnings"]  # the premise of the page test
    text = report(oom_run, tmp_path / "r.html")
    box = re.search(r"<div class=notices>(.*?)</div>", text)
    assert box, "no notices box"
    for words in ("<span class=oom>OOM</span>", "borrowed profile: h100-sxm",
                  "measured on H100-SXM", "fidelity fast", "one seed, 1 step(s)"):
        assert words in box.group(1), words
    assert text.index("Read before the numbers") < text.index("<h2>Figures")
    summary = text[text.index("<h2>Scenario summary"):text.index("<h2>Headline metrics")]
    for words in ("h200-roce-railopt", "qwen3-30b-a3b", "pp 2", "fast", "h100-sxm (borrowed)",
                  "1 seed (0)"):
        assert words in summary, words
    assert "model band" in text and "a borrowed profile: a lower bound" in text
    if "Figures need matplotlib" not in text:
        assert "Timeline of " in text and "one training step" in text


def test_borrowed_oom_page_in_headless_chromium(oom_run: Path, tmp_path: Path) -> None:
    from test_report import browse, chromium

    chromium()
    page = tmp_path / "r.html"
    report(oom_run, page)
    dom = browse(page, "--virtual-time-budget=3000", "--dump-dom").stdout
    assert re.search(r'<div class="notices">', dom), dom[:300]
    assert re.search(r'<span class="oom">OOM</span>', dom)
    assert "Scenario summary" in dom and "Timeline of " in dom


def test_sweep_page_keeps_every_points_fidelity_warning(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    assert main(["sweep", SCENARIO, *TINY, *FAST_WARNS, "--grid", "seed=0,1", "--out",
                 str(sweep), "--workers", "1"]) == 0
    text = report(sweep, tmp_path / "s.html")
    boxes = re.findall(r"<div class=notices><h3>Read before the numbers: (\w+)</h3>(.*?)</div>",
                       text)
    assert len(boxes) == 2  # one per point
    for _, body in boxes:
        assert "fidelity fast: 32 pipeline stages share each oversubscribed leaf" in body


def test_run_seeds_reports_mean_and_spread_of_every_headline_metric(tmp_path: Path) -> None:
    one, three = tmp_path / "one", tmp_path / "three"
    assert main(["run", SCENARIO, *TINY, "--out", str(one), "--json"]) == 0
    assert main(["run", SCENARIO, *TINY, "--seeds", "3", "--out", str(three), "--json"]) == 0
    single = json.loads((one / "result.json").read_text())
    seeded = json.loads((three / "result.json").read_text())
    section = seeded.pop("seeds")
    assert seeded == single  # the first seed's run is the single-seed run
    assert section["seeds"] == derive_seeds(0, 3) and section["seeds"][0] == 0
    assert section["count"] == 3 and section["steps"] == 1
    assert set(section["metrics"]) == set(METRICS)
    for s in section["metrics"].values():
        x = np.array(s["per_seed"])
        assert len(x) == 3 and s["mean"] == pytest.approx(x.mean())
        assert s["std"] == pytest.approx(x.std(ddof=1))
        assert s["min"] == x.min() and s["max"] == x.max()
    step = section["metrics"]["step_time_s.mean"]["per_seed"]
    assert step[0] == single["step_time_s"]["mean"] and len(set(step)) == 3  # seeds differ
    text = report(three, tmp_path / "r.html")
    assert "Spread over seeds" in text and "3 seeds, 1 step(s)" in text


@pytest.mark.parametrize("value", ["0", "-1", "1e9", "2.5", "three", "1001"])
@pytest.mark.parametrize("command", ["run", "quickstart"])
def test_bad_seeds_is_one_line_exit_2(command: str, value: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    args = [command, *([SCENARIO] if command == "run" else []), f"--seeds={value}"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --seeds:"), err


def test_seeds_are_deterministic_and_distinct() -> None:
    assert derive_seeds(7, 5) == derive_seeds(7, 5)
    assert derive_seeds(7, 5)[0] == 7 and len(set(derive_seeds(7, 5))) == 5
    assert derive_seeds(7, 3) == derive_seeds(7, 5)[:3]  # more seeds extend, never reshuffle


def test_paired_ratio_is_students_t_interval() -> None:
    num, den = [2.0, 2.2, 2.1, 2.5], [1.0, 1.0, 1.0, 1.0]
    up = paired_ratio(num, den)
    r = np.array(num)
    half = stats.t.ppf(0.975, 3) * r.std(ddof=1) / math.sqrt(4)
    assert up["interval"] == pytest.approx([r.mean() - half, r.mean() + half])
    assert paired_ratio([2.0], [1.0])["interval"] is None


def test_band_is_share_weighted_cv_error() -> None:
    """Closed form on a synthetic training result: attention (measured, h100-sxm's attention
    fit) 60 %, exposed comm (datasheet) 10 %, GEMMs (datasheet: no GEMM fit) 30 %."""
    profile = load_profile("h100-sxm")
    err = max(f.cv_p90_abs_pct_error or 0.0 for f in profile.fits if f.op == "attention")
    result = {"kind": "training", "step_time_s": {"mean": 10.0}, "attention_compute_s": 6.0,
              "comm_exposed_fraction": 0.1, "comm_tiers": {"send_recv": "datasheet"},
              "comm_choices": {}}
    band = model_band(result, profile, borrowed=True)
    assert band["band_pct_correlated"] == pytest.approx(0.6 * err)
    assert band["band_pct_independent"] == pytest.approx(0.6 * err)
    assert band["datasheet_share"] == pytest.approx(0.4)
    assert band["covered_share"] == pytest.approx(0.6)
    assert band["uncovered"] == ["collectives", "gemm"]


def test_moe_band_weights_stages_by_exposed_seconds() -> None:
    """An MoE result: dispatch (measured, priced by the collective fits) 1 s of 4 exposed,
    local experts (borrowed) 3 s: the band is a quarter of the collectives' largest error."""
    profile = load_profile("h200-sxm")
    err = max(f.cv_p90_abs_pct_error or 0.0 for f in profile.fits
              if f.op in ("all_gather", "all_reduce", "reduce_scatter", "all_to_all",
                          "all_to_allv", "send_recv"))
    result = {"kind": "moe_inference",
              "layer_breakdown_s": {"dispatch": {"exposed": 1.0, "hidden": 5.0},
                                    "moe_local": {"exposed": 3.0, "hidden": 0.0}},
              "cost_sources": {"dispatch": "measured", "moe_local": "borrowed"}}
    band = model_band(result, profile, borrowed=False)
    assert band["band_pct_correlated"] == pytest.approx(0.25 * err)
    assert band["borrowed_share"] == pytest.approx(0.75) and band["datasheet_share"] == 0.0
