"""``libra-des calibrate``: one command from measurement to a checked profile and its page."""

from __future__ import annotations

import importlib.util
import re
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
    # Self-contained: nothing to fetch (the SVGs' only references are to their own markers).
    assert not re.search(r'(?:src|href)="(?!#)', page)


def test_cpu_profile_refused_on_an_h200_topology(
    calibrated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = calibrated / "profile.json"
    argv = ["run", str(ROOT / "scenarios/quickstart.yaml"), "--set", f"profile={path}"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "measured on CPU" in err and "H200-SXM" in err


def host_run(profile: Path) -> dict[str, object]:
    """The paper's MoE breakdown, reduced, priced with ``profile``."""
    import numpy as np

    from libra_des.config import load_scenario
    from libra_des.results.moe_metrics import simulate_moe

    small = ["model.layers=4", "workload.batches=1", "workload.batch=4", "workload.seq_len=256"]
    sc = load_scenario(ROOT / "scenarios/paper-moe-breakdown.yaml", [*small,
                                                                    f"profile={profile}"])
    return simulate_moe(sc, np.random.default_rng(0))


def test_calibrate_writes_host_stages_and_a_run_prices_from_them(
    calibrated: Path, tmp_path: Path
) -> None:
    from libra_des.hardware.profiles.profile import Sourced as Src
    from libra_des.hardware.profiles.profile import save_profile

    host = load_profile(calibrated / "profile.json").host
    assert host is not None and host.cpu.startswith("CPU")
    assert {c.stage for c in host.checks} == {"sharding_cpu", "replication_cpu",
                                              "prediction_cpu"}
    assert all(c.measured_s > 0 and c.modelled_s > 0 for c in host.checks)
    assert host.torch_op_s.value > host.python_iteration_s.value > 0
    # The shipped H200 profile with this CPU's host block: the run prices its stages from it.
    paths = []
    for factor in (1.0, 10.0):
        dear = host.model_copy(update={"torch_op_s": Src(
            value=host.torch_op_s.value * factor, source=host.torch_op_s.source)})
        path = tmp_path / f"h200-host-{factor:g}.json"
        save_profile(load_profile(None).model_copy(update={"host": dear}), path)
        paths.append(path)
    base, dear_run = host_run(paths[0]), host_run(paths[1])
    prices = base["host_stages"]["prices"]  # type: ignore[index]
    assert prices["torch_op_s"]["value"] == host.torch_op_s.value
    assert prices["torch_op_s"]["tier"] == "measured" and host.cpu in prices["torch_op_s"]["source"]
    assert base["cost_sources"]["sharding_cpu"] == "measured"  # type: ignore[index]

    def stage_s(r: dict[str, object], name: str) -> float:
        return float(r["host_stages"]["per_layer_s"][name]["seconds"])  # type: ignore[index]

    for name in ("sharding_cpu", "replication_cpu"):
        assert stage_s(dear_run, name) > stage_s(base, name)
