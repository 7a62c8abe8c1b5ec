"""Profiles: schema, shipped datasheets, importers, fitting, cross-validation, commands."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from libra_des.cli import main
from libra_des.errors import InputError
from libra_des.hardware.collectives.curves import Curve
from libra_des.hardware.compute.kernels import (
    AttentionParams,
    attention_call,
    attention_work,
    cp_shard,
)
from libra_des.hardware.profiles.fitting import fit_profile
from libra_des.hardware.profiles.importers import import_files, parse_batch
from libra_des.hardware.profiles.profile import (
    AttentionShape,
    GemmShape,
    Piece,
    Sample,
    TimeStats,
    load_profile,
    save_profile,
    shipped_profiles,
)

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
NCCL = DATA / "nccl-tests-h200x8"
VIDUR = DATA / "vidur-profiles"
ATTN = DATA / "attention-h100" / "flash-attn-varlen-h100.psv"


def need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} is absent (the shared measurement data is not checked out)")
    return path


def cv_rows(
    capsys: pytest.CaptureFixture[str], fmt: str, files: list[Path], out: Path, once: bool = False
) -> list[dict[str, object]]:
    """Import into a fresh profile, then ``profile fit --cv --json``; returns its rows.

    ``once``: cross-validate during the import instead (the same fit and CV code path; saves
    fitting the large Vidur tables twice).
    """
    argv = ["profile", "import", "--format", fmt, *map(str, files), "--out", str(out)]
    if once:
        assert main([*argv, "--cv", "--json"]) == 0
        return list(json.loads(capsys.readouterr().out)["ops"])
    assert main(argv) == 0
    capsys.readouterr()
    assert main(["profile", "fit", str(out), "--cv", "--json"]) == 0
    return list(json.loads(capsys.readouterr().out)["ops"])


# ----------------------------------------------------------------------------- shipped profiles


def test_shipped_datasheet_numbers() -> None:
    assert {"h200-sxm", "h100-sxm", "a100-sxm"} <= set(shipped_profiles())
    h200, h100, a100 = (load_profile(n) for n in ("h200-sxm", "h100-sxm", "a100-sxm"))
    assert load_profile(None) == h200
    assert h200.peak_flops("bf16") == 989e12 and h200.hbm_bw == 4.8e12
    assert h100.peak_flops("bf16") == 989e12 and h100.hbm_bw == 3.35e12
    assert a100.peak_flops("bf16") == 312e12 and a100.hbm_bw == 2.039e12
    for prof in (h200, h100, a100):
        assert prof.samples == ()  # measured data files never ship
        assert prof.fits and all(
            f.source and f.cv_median_abs_pct_error is not None for f in prof.fits
        )
        sourced = [v for _, v in prof.peaks if v is not None] + [v for _, v in prof.kernels]
        assert all(len(s.source) > 10 for s in sourced)
    with pytest.raises(InputError):
        h200.peak_flops("int4")


def test_h200_attention_constants_come_from_the_h100_fit() -> None:
    fit = next(f for f in load_profile("h100-sxm").fits if f.op == "attention")
    k = load_profile("h200-sxm").kernels
    for name in ("efficiency", "cta_s", "heads_half", "launch_s"):
        assert getattr(k, f"attention_{name}").value == pytest.approx(fit.params[name], rel=1e-5)


def test_shipped_h200_fits_reproduce_the_logs() -> None:
    from libra_des.hardware.costs import CostModel

    prof = load_profile(None)
    model = CostModel(prof, prof.interconnect.fabric())
    imported = import_files("nccl-tests", sorted(need(NCCL).glob("*.perf.txt")))
    errors = [
        abs(model.collective(s.op, s.nbytes or 0, s.group).seconds / s.time.median - 1)
        for s in imported.samples
    ]
    assert np.median(errors) < 0.03


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    prof = load_profile("a100-sxm")
    path = save_profile(prof, tmp_path / "x.json")
    assert load_profile(path) == prof
    assert load_profile(json.loads(path.read_text())) == prof
    assert not list(tmp_path.glob(".*tmp"))  # atomic write leaves no temporary file


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{broken", "well-formed JSON"),
        ("[1, 2]", "a JSON object"),
        ('{"schema_version": 2}', "schema_version"),
        ('{"schema_version": 1, "device": "x"}', "profile."),
    ],
)
def test_bad_profile_files_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, needle: str
) -> None:
    bad = tmp_path / "p.json"
    bad.write_text(content)
    assert main(["profile", "show", str(bad)]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1
    assert main(["profile", "show", str(tmp_path / "missing.json")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


# ----------------------------------------------------------------------------- importers


def test_parse_batch_without_eval() -> None:
    assert parse_batch("[32] * (1024)", "b") == ((32, 1024),)
    assert parse_batch("[100, 200, 100]", "b") == ((100, 2), (200, 1))
    assert parse_batch("[1, 2] + [3] * 2", "b") == ((1, 1), (2, 1), (3, 2))
    for bad in ("__import__('os').system('true')", "[1] * (2) * 3", "[]", "[1.5]", "[-1]"):
        with pytest.raises(InputError):
            parse_batch(bad, "b")


def test_import_nccl_tests_log() -> None:
    imp = import_files("nccl-tests", [need(NCCL / "all_reduce-8gpu.perf.txt")])
    assert imp.device == "NVIDIA H200"
    assert len(imp.samples) == 11
    first = imp.samples[0]
    assert (first.op, first.group, first.gpus_per_node) == ("all_reduce", 8, 8)
    assert first.nbytes == 8388608 and first.time.median == pytest.approx(90.77e-6)


def test_import_nccl_tests_multi_host_layout(tmp_path: Path) -> None:
    ranks = "\n".join(
        f"#  Rank {r} Group  0 Pid 1 on node{r // 4} device {r % 4} [0000:00:00] NVIDIA H100"
        for r in range(8)
    )
    log = (
        "$ mpirun ./build/all_gather_perf -b 1M -e 2M -f 2 -g 1\n"
        "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 2097152\n"
        f"{ranks}\n"
        "#       size   count   type  redop  root   time  algbw  busbw #wrong  time algbw busbw\n"
        "     1048576  32768  float  none  -1  50.0  20.97  18.35  0  51.0  20.5  18.0\n"
        "     2097152  65536  float  none  -1  70.0  29.96  26.21  0  71.0  29.5  25.8\n"
    )
    path = tmp_path / "ag.txt"
    path.write_text(log)
    imp = import_files("nccl-tests", [path])
    assert {(s.op, s.group, s.gpus_per_node) for s in imp.samples} == {("all_gather", 8, 4)}
    assert [s.time.median for s in imp.samples] == pytest.approx([50e-6, 70e-6])


def test_import_vidur_and_attention_tables() -> None:
    vid = import_files("vidur-csv", [need(VIDUR / "a100_dgx_send_recv.csv")])
    layouts = {(s.group, s.gpus_per_node) for s in vid.samples}
    assert layouts == {(2, 1), (2, 2)} and vid.device == "A100"
    assert all(
        s.time.min and s.time.max and s.time.min <= s.time.median <= s.time.max for s in vid.samples
    )
    att = import_files("attention-psv", [need(ATTN)])
    assert len(att.samples) == 88 and att.device == "H100"
    shapes = {(s.attention.heads_q, s.attention.heads_kv) for s in att.samples if s.attention}
    assert shapes == {(64, 4), (8, 1)}


@pytest.mark.parametrize(
    ("fmt", "content"),
    [
        ("nccl-tests", "no table here\n"),
        ("vidur-csv", "a,b\n1,2\n"),
        ("attention-psv", "gpu_type|op|batch\nH100|attn|[1]\n"),
        ("yaml", "x"),
    ],
)
def test_bad_measurement_files_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str, content: str
) -> None:
    bad = tmp_path / "in.txt"
    bad.write_text(content)
    out = tmp_path / "p.json"
    assert (
        main(
            ["profile", "import", "--format", fmt, str(bad), "--out", str(out), "--device", "H200"]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1
    assert not out.exists()


def test_import_needs_a_known_device(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "all_reduce.txt"
    path.write_text(
        "# nThread 1 nGpus 2\n# size count type redop root time\n 1024 1 half sum -1 5\n"
    )
    argv = ["profile", "import", "--format", "nccl-tests", str(path), "--out", str(tmp_path / "p")]
    assert main(argv) == 2
    assert "--device" in capsys.readouterr().err
    assert main([*argv, "--device", "TPU v9"]) == 2
    assert main([*argv, "--device", "H100 SXM"]) == 0
    assert load_profile(tmp_path / "p").peak_flops() == 989e12


# ----------------------------------------------------------------------------- fitting


def synthetic(op: str, sizes: np.ndarray, secs: np.ndarray, group: int = 8) -> tuple[Sample, ...]:
    return tuple(
        Sample(
            op=op,
            nbytes=float(s),
            group=group,
            gpus_per_node=group,
            time=TimeStats(median=float(t)),
            source="synthetic",
        )
        for s, t in zip(sizes, secs, strict=True)
    )


def test_alpha_beta_fit_recovers_a_known_curve() -> None:
    truth = Curve((Piece(start=0, alpha_step=3e-6, eta=0.8, half=2e6, gamma=0.7),), "truth")
    sizes = np.geomspace(1e4, 1e10, 25)
    volume = 2 * 7 / 8 * sizes
    secs = truth.seconds(volume, 450e9, 14)
    prof = load_profile(None).model_copy(update={"fits": ()})
    _, results = fit_profile(prof.with_samples(synthetic("all_reduce", sizes, secs)), cv=True)
    (res,) = results
    assert res.fit.algorithm == "ring"
    assert float(np.max(res.fit_errors)) < 0.1 and float(np.median(res.cv_errors)) < 0.5
    (piece,) = res.fit.pieces
    assert piece.eta == pytest.approx(0.8, rel=0.02)


def test_regimes_are_split_and_stay_monotone() -> None:
    """A protocol switch (slower large-message regime) is found and time never falls."""
    sizes = np.linspace(2e6, 6.4e7, 400)
    secs = np.where(sizes < 3.2e7, 8e-6 + sizes / 270e9, 2e-5 + sizes / 225e9)
    prof = load_profile("a100-sxm").model_copy(update={"fits": ()})
    _, (res,) = fit_profile(prof.with_samples(synthetic("send_recv", sizes, secs, 2)), cv=True)
    assert len(res.fit.pieces) >= 2
    assert float(np.median(res.cv_errors)) < 1.0
    grid = np.linspace(1, 1e8, 5000)
    t = Curve(res.fit.pieces, "x").seconds(grid, 300e9, 1)
    assert np.all(np.diff(t) >= 0)


def test_attention_and_gemm_fits_recover_known_parameters() -> None:
    prof = load_profile("h100-sxm").model_copy(update={"fits": ()})
    truth = AttentionParams(
        efficiency=0.35, cta_s=2e-8, heads_half=2.0, launch_s=3e-5, bwd_ratio=0.86, bwd_flops=2.5
    )
    samples = []
    for length in (64, 256, 1024, 4096, 16384):
        for heads, cp in ((64, 1), (8, 1), (8, 4)):
            q, k = cp_shard(np.array([float(length)]), cp)
            work = float(attention_work(truth, 989e12, q, k, 128, False)[0]) * 32768 / length
            secs = float(attention_call(truth, np.asarray(heads * work), np.asarray(heads)))
            shape = AttentionShape(
                docs=((length, 32768 // length),), heads_q=heads, heads_kv=1, head_dim=128, cp=cp
            )
            samples.append(Sample(op="attention", attention=shape, time=TimeStats(median=secs)))
    # GEMM truth: efficiency 0.7, half_flops 1e9, gamma 0.6, launch 3 us.
    for m in (64, 512, 4096):
        for n in (1024, 8192):
            flops = 2.0 * m * n * 4096
            compute = (flops + 1e9**0.6 * flops**0.4) / (989e12 * 0.7)
            memory = 2 * (m * 4096 + 4096 * n + m * n) / 3.35e12
            samples.append(
                Sample(
                    op="gemm",
                    gemm=GemmShape(m=m, n=n, k=4096),
                    time=TimeStats(median=3e-6 + max(compute, memory)),
                )
            )
    fitted, results = fit_profile(prof.with_samples(tuple(samples)), cv=True)
    att = next(f for f in fitted.fits if f.op == "attention")
    assert att.params["efficiency"] == pytest.approx(0.35, rel=0.01)
    assert att.params["cta_s"] == pytest.approx(2e-8, rel=0.05)
    gemm = next(f for f in fitted.fits if f.op == "gemm")
    assert gemm.dtype == "bf16" and gemm.params["efficiency"] == pytest.approx(0.7, rel=0.05)
    assert all(float(np.median(r.cv_errors)) < 1.0 for r in results)


# ----------------------------------------------------------------------------- acceptance (CV)


def test_cv_nccl_tests_h200(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted(need(NCCL).glob("*.perf.txt"))
    rows = cv_rows(capsys, "nccl-tests", files, tmp_path / "h200.json")
    got = {(r["op"], r["group"]): r for r in rows}
    assert set(got) == {
        (op, n) for op in ("all_gather", "all_reduce", "reduce_scatter") for n in (2, 8)
    }
    for row in rows:
        assert row["kind"] == "cv" and row["n"] == 11
        assert row["median_abs_pct_error"] <= 5.0, row


def test_cv_attention_h100(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = cv_rows(capsys, "attention-psv", [need(ATTN)], tmp_path / "h100.json")
    (row,) = rows
    assert (row["op"], row["group"], row["n"]) == ("attention", 1, 88)
    assert row["median_abs_pct_error"] <= 10.0


def test_cv_vidur_a100(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = [need(VIDUR / "a100_dgx_all_reduce_intra_node.csv"), VIDUR / "a100_dgx_send_recv.csv"]
    rows = cv_rows(capsys, "vidur-csv", files, tmp_path / "a100.json", once=True)
    got = {(r["op"], r["group"], r["gpus_per_node"]): r for r in rows}
    wanted = [("all_reduce", n, n) for n in (2, 4, 8)] + [("send_recv", 2, 1), ("send_recv", 2, 2)]
    for key in wanted:
        assert got[key]["median_abs_pct_error"] <= 10.0, got[key]
        assert got[key]["n"] > 900


def test_import_extends_and_strips(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p.json"
    files = sorted(need(NCCL).glob("all_gather*.perf.txt"))
    assert (
        main(["profile", "import", "--format", "nccl-tests", *map(str, files), "--out", str(out)])
        == 0
    )
    assert (
        main(
            [
                "profile",
                "import",
                "--format",
                "nccl-tests",
                str(files[0]),
                "--out",
                str(out),
                "--json",
            ]
        )
        == 0
    )
    prof = load_profile(out)
    assert len(prof.samples) == 22  # re-importing a file replaces its samples
    assert {(f.op, f.group) for f in prof.fits if f.op == "all_gather"} == {
        ("all_gather", 2),
        ("all_gather", 8),
    }
    assert (
        main(
            [
                "profile",
                "import",
                "--format",
                "attention-psv",
                str(need(ATTN)),
                "--out",
                str(out),
                "--strip-samples",
            ]
        )
        == 0
    )
    stripped = load_profile(out)
    assert stripped.samples == () and {f.op for f in stripped.fits} >= {"all_gather", "attention"}
    capsys.readouterr()


def test_show_and_compare(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "show", "h200-sxm"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA H200 SXM" in out and "nvls" in out and "4.80 TB/s" in out  # HBM
    assert main(["profile", "compare", "a100-sxm", "h200-sxm"]) == 0
    out = capsys.readouterr().out
    assert "a100-sxm" in out and "all_reduce" in out and "attention" in out
