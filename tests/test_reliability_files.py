"""Hostile measurement and profile files: strict importers and profile checks.

Every case is synthetic (no shared data needed) and fails before any fit, so the file runs
in about a second.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from libra_des.cli import main
from libra_des.config import ROOT

HEADER = (
    "$ ./build/all_reduce_perf -b 8M -e 32M -f 2 -g 8\n"
    "# nThread 1 nGpus 8 minBytes 8388608 maxBytes 33554432\n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    "     time   algbw   busbw #wrong\n"
)
ROWS = [
    "     8388608       2097152     float     sum      -1    90.77   92.42  161.73      0"
    "    90.10   93.10  162.93      0",
    "    16777216       4194304     float     sum      -1    130.5  128.56  224.98      0"
    "    130.1  128.96  225.67      0",
]


def nccl(tmp_path: Path, rows: list[str]) -> Path:
    path = tmp_path / "all_reduce.txt"
    path.write_text(HEADER + "\n".join(rows) + "\n")
    return path


def import_argv(fmt: str, path: Path, out: Path) -> list[str]:
    return ["profile", "import", "--format", fmt, str(path), "--out", str(out),
            "--device", "H200"]


def one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error:"), err
    return err


@pytest.mark.parametrize(
    "last",
    [
        "    16777216       4194304     float     sum      -1    13",  # cut mid-row
        ROWS[1].replace("130.5", "13"),  # time edited: disagrees with algbw
        ROWS[1].replace("130.5", "nan"),
        ROWS[1].replace("130.5", "inf"),
        ROWS[1].replace("130.5", "-130.5"),
        ROWS[1].replace("130.5", "0"),
        ROWS[1].replace("16777216", "1" * 300),
        ROWS[1].replace("16777216", "16777216.5"),
    ],
)
def test_nccl_tests_rows_are_whole_and_sane(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, last: str
) -> None:
    out = tmp_path / "p.json"
    err = one_line(capsys, import_argv("nccl-tests", nccl(tmp_path, [ROWS[0], last]), out))
    assert "all_reduce.txt:5" in err  # file and line
    assert not out.exists()


def test_nccl_tests_zero_groups_and_skipped_rows(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = nccl(tmp_path, ROWS)
    path.write_text(path.read_text().replace("nGpus 8", "nGpus 0"))
    one_line(capsys, import_argv("nccl-tests", path, tmp_path / "p.json"))
    zero = "           0             0     float     sum      -1     5.10    0.00    0.00      0" \
           "     5.00    0.00    0.00      0"
    path = nccl(tmp_path, [zero, *ROWS])
    assert main(import_argv("nccl-tests", path, tmp_path / "p.json")) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "skipped 1 rows" in err


VIDUR_HEAD = ("time_stats.all_reduce.min,time_stats.all_reduce.max,time_stats.all_reduce.mean,"
              "time_stats.all_reduce.median,time_stats.all_reduce.std,num_workers,size,"
              "collective,devices_per_node\n")


@pytest.mark.parametrize(
    "row",
    [
        "0.01,0.02,0.015,nan,0.004,2,2048,all_reduce,2",
        "0.01,0.02,0.015,inf,0.004,2,2048,all_reduce,2",
        "0.01,0.02,0.015,0.016,0.004,0,2048,all_reduce,2",
        "0.01,0.02,0.015,0.016,0.004,2,-2048,all_reduce,2",
        "0.01,0.02,0.015,0.016,0.004,2," + "9" * 300 + ",all_reduce,2",
        "0.01,0.02,0.015,0.016,0.004,2.5,2048,all_reduce,2",
        "0.01,0.02,0.015,0.016",
    ],
)
def test_vidur_rows(capsys: pytest.CaptureFixture[str], tmp_path: Path, row: str) -> None:
    path = tmp_path / "v.csv"
    path.write_text(VIDUR_HEAD + row + "\n")
    err = one_line(capsys, import_argv("vidur-csv", path, tmp_path / "p.json"))
    assert "v.csv:2" in err


PSV_HEAD = "gpu_type|tp|cp|hqo|hkv|d|batch|total_len|total_latency(ms)\n"


@pytest.mark.parametrize(
    "row",
    [
        "H100|1|1|8|1|128|[32] * (" + "9" * 300 + ")|32|0.1",
        "H100|1|1|8|1|128|[32] * (4)|128|nan",
        "H100|1|1|0|1|128|[32] * (4)|128|0.1",
        "H100|1|1|8|1|128|[" + "9" * 40 + "]|128|0.1",
        "H100|1|1|8|1|128|[32] * (4)|128|-1",
    ],
)
def test_attention_rows(capsys: pytest.CaptureFixture[str], tmp_path: Path, row: str) -> None:
    path = tmp_path / "a.psv"
    path.write_text(PSV_HEAD + row + "\n")
    err = one_line(capsys, import_argv("attention-psv", path, tmp_path / "p.json"))
    assert "a.psv:2" in err


def shipped() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ROOT / "calibration/profiles/h200-sxm.json").read_text())
    return data


def edit(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(data)
    node = out
    keys = path.split(".")
    for key in keys[:-1]:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[keys[-1]] = value
    return out


@pytest.mark.parametrize(
    ("path", "value", "needle"),
    [
        ("fits.0.pieces", [], "pieces"),
        ("peaks.bf16_flops.value", 0, "bf16_flops"),
        ("peaks.bf16_flops.value", 1e30, "bf16_flops"),
        ("interconnect.intra_bw.value", 0, "intra_bw"),
        ("interconnect.gpus_per_node", True, "true/false"),
    ],
)
def test_bad_profiles(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, path: str, value: Any, needle: str
) -> None:
    prof = tmp_path / "p.json"
    prof.write_text(json.dumps(edit(shipped(), path, value)))
    for argv in (["profile", "show", str(prof)], ["validate", str(prof)],
                 ["cost", "--profile", str(prof), "--op", "gemm", "--m", "8", "--n", "8",
                  "--k", "8"]):
        assert needle in one_line(capsys, argv)


@pytest.mark.parametrize(
    "text",
    [
        lambda s: s.replace('"value": 989000000000000.0', '"value": Infinity', 1),
        lambda s: s.replace('"value": 989000000000000.0', '"value": NaN', 1),
        lambda s: s.replace('"value": 989000000000000.0', '"value": 1e999', 1),
        lambda s: s.replace('"name": ', '"name": "x", "name": ', 1),
        lambda s: "[" * 100_000 + "]" * 100_000,
    ],
)
def test_hostile_profile_json(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: Any
) -> None:
    prof = tmp_path / "p.json"
    prof.write_text(text((ROOT / "calibration/profiles/h200-sxm.json").read_text()))
    one_line(capsys, ["profile", "show", str(prof)])
    scenario = tmp_path / "s.yaml"
    scenario.write_text((ROOT / "scenarios/quickstart.yaml").read_text() + f"profile: {prof}\n")
    one_line(capsys, ["run", str(scenario), "--out", str(tmp_path / "o")])
