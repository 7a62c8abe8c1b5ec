"""``libra-des calibrate``: one command from measurement to a checked profile and its page."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from libra_des.cli import main
from libra_des.hardware.profiles.profile import load_profile

ROOT = Path(__file__).resolve().parents[1]
HAS_TORCH = importlib.util.find_spec("torch") is not None


def test_help_does_not_import_torch() -> None:
    code = ("import sys\nfrom libra_des.cli import main\ntry:\n    main(['calibrate', '--help'])\n"
            "except SystemExit:\n    pass\nprint('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("False") and "--quick" in done.stdout


def test_without_torch_one_line_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real(name, *a))
    assert main(["calibrate", "--device", "cpu", "--out", str(tmp_path / "P")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "calibrate extra" in err and "[calibrate]" in err
    assert not (tmp_path / "P").exists()


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not HAS_TORCH:
        pytest.skip("calibrate needs torch (the calibrate extra)")
    out = tmp_path_factory.mktemp("cal") / "P"
    argv = [sys.executable, "-m", "libra_des.cli", "calibrate", "--device", "cpu", "--world",
            "2", "--quick", "--out", str(out)]
    # Its speed (the two-minute bound on a CPU) is measured in benchmarks/, not asserted here.
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def test_calibrate_writes_profile_and_page(calibrated: Path) -> None:
    out = calibrated
    prof = load_profile(out / "profile.json")
    assert prof.gpu == "CPU" and prof.gpu_count == 2 and "gloo" in prof.interconnect.name
    assert {f.op for f in prof.fits} >= {"gemm", "attention", "all_reduce", "all_to_all"}
    assert all(f.cv_median_abs_pct_error is not None for f in prof.fits)  # cross-validated
    assert {c.collective for c in prof.interference} == {"all_reduce", "all_to_all"}
    for case in prof.interference:
        assert case.kernel_slowdown > 0 and 0 <= case.overlap <= 1
    page = (out / "validation.html").read_text()
    assert page.startswith("<!doctype html>") and page.count("<svg") == len(prof.fits)
    assert "src=" not in page and "href=" not in page  # self-contained: nothing to fetch


def test_cpu_profile_refused_on_an_h200_topology(
    calibrated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = calibrated / "profile.json"
    argv = ["run", str(ROOT / "scenarios/quickstart.yaml"), "--set", f"profile={path}"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "measured on CPU" in err and "H200-SXM" in err
