"""``libra-des report``: one self-contained HTML page, checked in headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from libra_des.cli import main

SCENARIO = str(Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.yaml")
MOE = str(Path(__file__).resolve().parents[1] / "scenarios" / "paper-moe-breakdown.yaml")
TINY = ["--set", "parallelism.dp=2", "--set", "parallelism.pp=2", "--set",
        "parallelism.gbs=8", "--set", "balancer.pool_size=2", "--set", "model.layers=2"]
TINY_MOE = ["--set", "model.layers=2", "--set", "workload.batches=1", "--set",
            "workload.batch=4", "--set", "workload.seq_len=128"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run")
    assert main(["run", SCENARIO, *TINY, "--out", str(out), "--json"]) == 0
    return out


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if found := shutil.which(name):
            return found
    pytest.skip("no headless Chromium (Debian package 'chromium'; .ci/run installs it)")


def browse(page: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           *flags, page.as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def test_run_report_is_self_contained(run_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    page = tmp_path / "r.html"
    assert main(["report", str(run_dir), "--out", str(page)]) == 0
    text = page.read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text)  # nothing fetched
    assert text.count('src="data:image/png;base64,') >= 3
    for words in ("Headline metrics", "wall time of one training step", "Scenario (resolved)",
                  "Where each cost came from", "not recorded", "pool_size: 2",
                  "peaks.bf16_flops", "datasheet"):
        assert words in text, words


def test_report_shows_in_headless_chromium(run_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    page = tmp_path / "r.html"
    assert main(["report", str(run_dir), "--out", str(page)]) == 0
    shot = tmp_path / "shot.png"
    done = browse(page, f"--screenshot={shot}", "--window-size=1200,3000")
    assert shot.is_file() and shot.read_bytes()[:4] == b"\x89PNG", done.stderr[-500:]
    assert shot.stat().st_size > 20_000  # a blank page compresses to a few kB
    dom = browse(page, "--virtual-time-budget=3000", "--dump-dom").stdout
    body = re.search(r"<body[^>]*>", dom)
    assert body, dom[:300]
    total = re.search(r'data-images-total="(\d+)"', body.group(0))
    decoded = re.search(r'data-images-decoded="(\d+)"', body.group(0))
    assert total and decoded, body.group(0)
    assert int(total.group(1)) >= 3 and decoded.group(1) == total.group(1)


@pytest.fixture(scope="module")
def moe_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The paper MoE scenario swept over two axes: lines, a heatmap, the published table."""
    sweep = tmp_path_factory.mktemp("sweep")
    base = TINY_MOE[:-2]  # the grid sets workload.seq_len (a --set of it is refused)
    assert main(["sweep", MOE, *base, "--grid", "balancer.policy=sglang,libra",
                 "--grid", "workload.seq_len=64,128", "--out", str(sweep),
                 "--workers", "1"]) == 0
    return sweep


def test_sweep_and_paper_report_show_in_headless_chromium(moe_sweep: Path,
                                                          tmp_path: Path) -> None:
    """A sweep page with its line figures, heatmaps and the paper's published table renders:
    every image decodes, and the table and figures are in the rendered DOM."""
    pytest.importorskip("matplotlib")
    page = tmp_path / "s.html"
    assert main(["report", str(moe_sweep), "--out", str(page)]) == 0
    shot = tmp_path / "shot.png"
    done = browse(page, f"--screenshot={shot}", "--window-size=1200,6000")
    assert shot.is_file() and shot.stat().st_size > 40_000, done.stderr[-500:]
    dom = browse(page, "--virtual-time-budget=3000", "--dump-dom").stdout
    body = re.search(r"<body[^>]*>", dom)
    assert body, dom[:300]
    total = re.search(r'data-images-total="(\d+)"', body.group(0))
    decoded = re.search(r'data-images-decoded="(\d+)"', body.group(0))
    assert total and decoded and decoded.group(1) == total.group(1), body.group(0)
    assert int(total.group(1)) >= 2 * 4  # per metric: one panel per axis, and a heatmap
    for words in ("Simulated against published: paper-moe-breakdown", "simulated / published",
                  "against each swept axis (balancer.policy; workload.seq_len)",
                  "over the two swept axes",
                  "prefill-time speed-up over sglang"):
        assert words in dom, words


def test_sweep_report_with_reference(moe_sweep: Path, tmp_path: Path) -> None:
    sweep = moe_sweep
    import json

    index = json.loads((sweep / "sweep.json").read_text())
    libra = next(p for p in index["points"] if p["overrides"]["balancer.policy"] == "libra")
    simulated = libra["metrics"]["moe_layer_s"]
    ref = tmp_path / "ref.yaml"
    ref.write_text(f"- metric: moe_layer_s\n  value: {simulated / 1.25!r}\n"
                   "  source: made-up paper, table 1\n  where: {balancer.policy: libra}\n")
    page = tmp_path / "s.html"
    assert main(["report", str(sweep), "--out", str(page), "--reference", str(ref)]) == 0
    text = page.read_text()
    assert "Simulated against reference" in text and "+25.0%" in text
    assert "made-up paper, table 1" in text and 'onclick="sortBy(this)"' in text
    assert text.count("<tr>") >= 2 + 2  # both points in the sortable table


def test_bad_folder_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "x.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: RUN_OR_SWEEP_DIR:") and err.count("\n") == 1
    assert not (tmp_path / "x.html").exists()


def test_report_draws_only_what_it_is_given(run_dir: Path) -> None:
    """The page draws nothing itself: without a drawer it says so, with one it inlines exactly
    the images handed in (the ``report`` command decides what to draw)."""
    from dataclasses import dataclass

    from libra_des.report import NO_DRAWER, render

    bare = render(run_dir)
    assert "data:image/png" not in bare and "Figures need matplotlib" in bare
    assert NO_DRAWER.startswith("Figures need matplotlib")

    @dataclass(frozen=True)
    class Stub:
        caption: str
        png_base64: str

    seen = []

    def draw(src: object) -> list[Stub]:
        seen.append(src)
        return [Stub("a stub <figure>", "AAAA")]

    page = render(run_dir, draw=draw)
    assert len(seen) == 1 and page.count('src="data:image/png;base64,AAAA"') == 1
    assert "a stub &lt;figure&gt;" in page
