"""GPU records (``libra_des/hardware/gpu_records.py``): shipped facts, exact names, user folders.

The toy GPU (``tests/toy_gpu.yaml``) is the "adding a GPU" recipe of ``docs/architecture.md``
end to end: one record in a user folder, named by a topology, read by the memory model
(training and MoE) and, through a profile measured on it, by the SM-count consumers.
"""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from libra_des.base.identity import code_fingerprint
from libra_des.cli import main
from libra_des.config import ROOT, load_scenario
from libra_des.errors import InputError
from libra_des.hardware.collectives.nccl_tuner import generation
from libra_des.hardware.compute import memory as mem
from libra_des.hardware.compute.kernels import sm_count
from libra_des.hardware.costs import CostModel
from libra_des.hardware.fabric.topology_spec import parse_spec, read_spec, shipped_topologies
from libra_des.hardware.gpu_records import (
    ASSUMED_DEVICE,
    GPU_DIR,
    RECORDS_ENV,
    device_record,
    gpu_record,
    records,
)
from libra_des.hardware.profiles.profile import load_profile, shipped_profiles
from libra_des.kinds.simulation import simulate
from libra_des.results.moe_metrics import simulate_moe
from libra_des.sim.moe.setup import USABLE_HBM, check_memory

TOY = Path(__file__).resolve().with_name("toy_gpu.yaml")
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"
BREAKDOWN = ROOT / "scenarios" / "paper-moe-breakdown.yaml"
GIB = 2.0**30

#: The per-GPU tables the records replaced, as they stood (HBM_BYTES, SM_COUNT, generation()):
#: every shipped record of these GPUs must give the same numbers, or results move.
OLD_HBM = {"H200-SXM": 141e9, "H200-NVL": 141e9, "H100-SXM": 80e9, "A100-SXM": 80e9,
           "L40S": 48e9, "GB200": 186e9}
OLD_SMS = {"H200-SXM": 132, "H200-NVL": 132, "H100-SXM": 132, "H800": 132, "H20": 78,
           "A100-SXM": 108, "L40S": 142, "NVIDIA H200 SXM": 132, "NVIDIA H100 SXM": 132,
           "NVIDIA A100 SXM 80GB": 108, "CPU": 132}
OLD_GENERATION = {"NVIDIA H200 SXM": "hopper", "NVIDIA H100 SXM": "hopper",
                  "NVIDIA A100 SXM 80GB": "ampere", "L40S": "hopper", "GB200": "blackwell",
                  "B200": "blackwell", "MI300X": "hopper", "CPU": "hopper"}


def test_records_keep_the_old_tables() -> None:
    for name, size in OLD_HBM.items():
        assert mem.device_hbm(name) == size, name
    for name, sms in OLD_SMS.items():
        assert sm_count(name) == sms, name
    for name, gen in OLD_GENERATION.items():
        assert generation(name) == gen, name


def test_every_shipped_topology_and_profile_names_a_record() -> None:
    for name in shipped_topologies():
        assert gpu_record(parse_spec(read_spec(name)).gpu).name
    for name in shipped_profiles():
        profile = load_profile(name)
        assert device_record(profile.device) is gpu_record(profile.gpu or "")


def test_shipped_profiles_and_topologies_agree_with_their_records() -> None:
    """A profile's datasheet peaks and a topology's NVLink rate are the record's facts."""
    for name in shipped_profiles():
        profile = load_profile(name)
        record = gpu_record(profile.gpu or "")
        for peak in ("bf16_flops", "fp16_flops", "fp32_flops", "tf32_flops", "fp8_flops",
                     "hbm_bytes_per_s"):
            mine, theirs = getattr(profile.peaks, peak), getattr(record, peak)
            assert (mine is None) == (theirs is None), (name, peak)
            assert mine is None or mine.value == theirs.value, (name, peak)
        assert record.nvlink_bytes_per_s is not None
        assert profile.interconnect.intra_bw.value == record.nvlink_bytes_per_s.value
    for name in shipped_topologies():
        spec = parse_spec(read_spec(name))
        record = gpu_record(spec.gpu)
        link = record.nvlink_bytes_per_s if spec.domain.type == "nvswitch" else (
            record.pcie_bytes_per_s)
        assert link is not None and spec.domain.bandwidth == link.value, name


def test_the_records_install_with_the_package() -> None:
    """A non-editable install carries the shipped records (setuptools package data)."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pattern = meta["tool"]["setuptools"]["package-data"]["libra_des.hardware"]
    shipped = {p.relative_to(GPU_DIR.parent) for p in GPU_DIR.glob("*.yaml")}
    assert shipped and all(p.match(pattern[0]) for p in shipped)


def test_every_fact_names_its_source_and_tier() -> None:
    for record in set(records().values()):
        tiers = record.tiers()
        assert {"sm_count", "hbm_bytes", "bf16_flops", "nccl_generation"} <= tiers.keys()
        assert set(tiers.values()) <= {"datasheet", "measured", "assumption"}
    for name in ("B200", "GB200", "MI300X"):
        assert gpu_record(name).tiers()["bf16_flops"] == "datasheet"


def test_names_are_exact() -> None:
    assert gpu_record("NVIDIA H200 SXM") is gpu_record("H200-SXM")
    for near in ("H200", "h200-sxm", "H200-SXM-141GB"):
        with pytest.raises(InputError, match=r"topology\.gpu") as err:
            gpu_record(near)
        assert str(GPU_DIR) in err.value.line() and "\n" not in err.value.line()
    assert device_record("a CPU") is gpu_record(ASSUMED_DEVICE)


def test_unknown_gpu_exits_2_naming_the_record_folders(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    monkeypatch.setenv(RECORDS_ENV, str(tmp_path))
    code = main(["run", str(QUICKSTART), "--set", "topology_params.gpu=TPU-v9",
                 "--out", str(tmp_path / "never-written")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0
    assert "topology.gpu" in err and "TPU-v9" in err
    assert str(GPU_DIR) in err and str(tmp_path) in err
    assert not (tmp_path / "never-written").exists()


def user_folder(tmp_path: Path, text: str, name: str = "mine.yaml") -> Path:
    folder = tmp_path / "gpus"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)
    return folder


def test_user_records_enter_the_code_fingerprint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    """A sweep point priced with a user record is not reused once that record changes."""
    folder = user_folder(tmp_path, TOY.read_text())
    prints = []
    for text in (None, TOY.read_text(), TOY.read_text().replace("value: 66", "value: 64")):
        if text is not None:
            monkeypatch.setenv(RECORDS_ENV, str(folder))
            (folder / "mine.yaml").write_text(text)
        code_fingerprint.cache_clear()
        prints.append(code_fingerprint())
    code_fingerprint.cache_clear()
    assert len(set(prints)) == 3


def test_a_bad_record_is_one_line_naming_file_and_field(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    text = TOY.read_text().replace("tier: assumption, source: \"our assumption (toy)\"}\nhbm",
                                   "tier: guess, source: \"toy\"}\nhbm", 1)
    monkeypatch.setenv(RECORDS_ENV, str(user_folder(tmp_path, text)))
    with pytest.raises(InputError) as err:
        records()
    assert "mine.yaml" in err.value.field and "sm_count.tier" in err.value.field
    monkeypatch.setenv(RECORDS_ENV, str(tmp_path / "missing"))
    with pytest.raises(InputError, match=RECORDS_ENV):
        records()


def test_a_user_record_may_not_take_a_shipped_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    text = TOY.read_text().replace('aliases: ["Toy GPU 123GB"]', 'aliases: ["H100-SXM"]')
    monkeypatch.setenv(RECORDS_ENV, str(user_folder(tmp_path, text)))
    with pytest.raises(InputError, match=r"h100-sxm\.yaml"):
        records()


# ------------------------------------------------------------------------------ the toy GPU

@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The recipe: one record file in a user folder, the folder named by the variable."""
    folder = tmp_path / "my-gpus"
    folder.mkdir()
    shutil.copy(TOY, folder / TOY.name)
    monkeypatch.setenv(RECORDS_ENV, str(folder))
    return tmp_path


def toy_profile(where: Path) -> Path:
    """The shipped H200 profile as if measured on the toy (only its device names change)."""
    data: dict[str, Any] = json.loads((ROOT / "calibration/profiles/h200-sxm.json").read_text())
    data.update(device="Toy GPU 123GB", gpu="Toy-GPU", name="toy")
    path = where / "toy.json"
    path.write_text(json.dumps(data))
    return path


TRAIN = ["parallelism.dp=4", "parallelism.cp=4", "parallelism.pp=1", "parallelism.gbs=8",
         "balancer.pool_size=4", "steps=1", "workload=longctx-256k", "model.layers=4",
         "variance.enabled=false", "balancer.heads_split=4", "balancer.block_size=16384",
         "topology_params.nodes=4", "profile_scope=borrowed"]


def test_toy_gpu_trains_with_its_hbm(toy: Path) -> None:
    on_toy = [*TRAIN, "topology_params.gpu=Toy-GPU"]
    result = simulate(load_scenario(QUICKSTART, on_toy))[0]["memory"]
    assert result["hbm_gib"] == pytest.approx(123e9 / GIB, rel=1e-12)
    assert result["hbm_source"] == "Toy-GPU assumption HBM: our assumption (toy)"
    stock = simulate(load_scenario(QUICKSTART, TRAIN))[0]["memory"]
    assert stock["hbm_gib"] == pytest.approx(141e9 / GIB, rel=1e-12)
    assert result["capacity_gib"] < stock["capacity_gib"]


def test_toy_gpu_runs_moe_with_its_sms(toy: Path) -> None:
    small = ["model.layers=4", "workload.batches=1", "variance.enabled=false",
             "topology_params={gpu: Toy-GPU}"]
    profile = toy_profile(toy)
    measured = load_profile(str(profile))
    assert CostModel(measured, measured.interconnect.fabric()).sms == 66
    own = simulate_moe(load_scenario(BREAKDOWN, [*small, f"profile={profile}"]),
                       np.random.default_rng(0))
    borrowed = simulate_moe(load_scenario(BREAKDOWN, [*small, "profile_scope=borrowed"]),
                            np.random.default_rng(0))
    # Same numbers but the SM count (66 on the toy, 132 on the H200 profile's device): the
    # per-SM rates of the dispatch kernels and the SMs left to compute differ.
    assert own["moe_layer_s"] != borrowed["moe_layer_s"]
    # The toy's HBM is what the MoE memory check holds the resident weights against: all 94
    # layers with 600 slots (75 GB resident + 45 GB of slots) fit in an H200, not in the toy.
    full = ["workload.batches=1", "variance.enabled=false", "balancer.slots=600"]
    check_memory(load_scenario(BREAKDOWN, full), 8, "H200-SXM")
    usable = f"{123e9 * USABLE_HBM / 1e9:.1f} GB usable HBM of Toy-GPU"
    with pytest.raises(InputError, match=usable):
        simulate_moe(load_scenario(BREAKDOWN, [*full, "topology_params={gpu: Toy-GPU}",
                                                f"profile={profile}"]),
                     np.random.default_rng(0))
