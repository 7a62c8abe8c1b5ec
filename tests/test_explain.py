"""``libra-des explain``: the difference of two training runs split into components that add
up to it (within 1e-9 of the difference), for every pair of systems in every training paper
scenario at the reduced size the golden tests use; a dropped component is seen; bad input is
one line and exit 2."""

from __future__ import annotations

import itertools
import json
import math
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from test_scenarios import reduced

from libra_des.api import explain, explain_results
from libra_des.api.explain import explain_runs
from libra_des.cli import main
from libra_des.config import ROOT, load_scenario
from libra_des.errors import CheckError, InputError
from libra_des.kinds.simulation import simulate
from libra_des.results import attribution
from libra_des.sim.training import attribution as parts

PAPER = sorted(p for p in (ROOT / "scenarios").glob("paper-*.yaml")
               if "moe" not in p.stem)
SYSTEMS = ("libra", "ulysses", "wlb_llm", "distca")


@cache
def result(stem: str, policy: str, *extra: str) -> dict[str, Any]:
    """The scenario's reduced-size result under ``policy`` (one run per scenario and policy)."""
    path = ROOT / "scenarios" / f"{stem}.yaml"
    res, _ = simulate(load_scenario(path, [*reduced(path), f"balancer.policy={policy}", *extra]))
    data: dict[str, Any] = json.loads(json.dumps(res))  # as result.json holds it
    return data


def test_the_training_paper_scenarios_are_all_here() -> None:
    assert len(PAPER) == 8


@pytest.mark.parametrize("path", PAPER, ids=[p.stem for p in PAPER])
def test_components_add_up_for_every_pair_of_systems(path: Path) -> None:
    for pol in SYSTEMS:  # each run's own parts sum to its measures
        res = result(path.stem, pol)
        for measure in attribution.MEASURES:
            total = math.fsum(res["attribution"][measure].values())
            assert math.isclose(total, res[measure]["mean"], rel_tol=1e-9), (pol, measure)
    for a, b in itertools.combinations(SYSTEMS, 2):
        found = explain_results(result(path.stem, a), result(path.stem, b))
        for split in found.splits:
            diff = split.difference
            assert diff != 0.0, (a, b, split.measure)  # the systems differ
            total = math.fsum(split.components.values())
            assert abs(total - diff) <= 1e-9 * abs(diff), (a, b, split.measure)
        assert found.adds_up
        assert set(found.splits[0].components) == set(attribution.COMPONENTS)


def dp_pair() -> tuple[dict[str, Any], dict[str, Any]]:
    return result("paper-dp-scaling-256k", "libra"), result("paper-dp-scaling-256k", "ulysses")


def moving() -> list[str]:
    """The parts that differ between Libra and Ulysses in the DP-scaling scenario."""
    a, b = dp_pair()
    split = explain_results(a, b).splits[0]
    return [k for k, v in split.components.items() if abs(v) > 1e-6 * abs(split.difference)]


def test_the_pair_moves_several_components() -> None:
    assert {"inter_pool_imbalance", "comm_rate", "interference", "kernel_efficiency"} <= set(
        moving())


@pytest.mark.parametrize("dropped", ["inter_pool_imbalance", "comm_exposed", "interference",
                                     "kernel_efficiency", "intra_pool_imbalance",
                                     "runtime_noise"])
def test_a_dropped_component_breaks_the_sum(monkeypatch: pytest.MonkeyPatch,
                                            dropped: str) -> None:
    a, b = dp_pair()
    assert explain_results(a, b).adds_up
    monkeypatch.setattr(attribution, "PARTS", tuple(p for p in parts.PARTS if p != dropped))
    assert not explain_results(a, b).adds_up


def test_a_part_lost_in_the_simulator_fails_its_built_in_check(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = parts.add

    def lossy(store: dict[str, float], key: str, value: Any) -> None:
        real(store, key, 0.0 if key == "interference" else value)

    monkeypatch.setattr(parts, "add", lossy)
    path = ROOT / "scenarios" / "paper-dp-scaling-256k.yaml"
    with pytest.raises(CheckError, match="parts add up"):
        simulate(load_scenario(path, reduced(path)))


def test_detailed_fidelity_records_contention_and_adds_up() -> None:
    stem = "paper-dp-scaling-256k"
    a = result(stem, "libra", "fidelity=detailed")
    b = result(stem, "ulysses", "fidelity=detailed")
    found = explain_results(a, b)
    assert found.adds_up
    assert any(abs(r["attribution"]["step_time_s"]["contention"]) > 0 for r in (a, b))


def test_bytes_and_rate_split_a_product_exactly() -> None:
    by_bytes, by_rate = attribution.bytes_and_rate((3.0, 2.0), (1.0, 4.0))
    assert math.isclose(by_bytes + by_rate, 2.0)
    # Closed form: dB * mean rate, mean bytes * dr.
    assert math.isclose(by_bytes, -2.0 * (1.5 + 0.25) / 2)
    assert math.isclose(by_rate, 3.0 * (1.5 - 0.25))


def write(folder: Path, res: dict[str, Any]) -> Path:
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps(res))
    return folder


def test_the_command_prints_a_table_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "160")  # wide enough that no component's name folds
    a, b = dp_pair()
    ra, rb = write(tmp_path / "libra", a), write(tmp_path / "ulysses", b)
    assert main(["explain", str(ra), str(rb)]) == 0
    out = capsys.readouterr().out
    assert "inter-pool imbalance" in out and "exposed comm: rate" in out
    assert main(["explain", str(ra / "result.json"), str(rb), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["adds_up"] and data["policies"] == ["libra", "ulysses"]
    assert math.isclose(data["step_time_s"]["difference"],
                        a["step_time_s"]["mean"] - b["step_time_s"]["mean"])
    assert main(["explain", str(ra), str(rb), "--json", "--components",
                 "inter_pool_imbalance,comm_rate"]) == 0
    kept = json.loads(capsys.readouterr().out)["step_time_s"]["components"]
    assert set(kept) == {"inter_pool_imbalance", "comm_rate"}
    found = explain(ra, rb)
    assert found.policies == ("libra", "ulysses") and found.adds_up


def bad(tmp_path: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["explain", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err
    return err


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    a, b = dp_pair()
    ra, rb = write(tmp_path / "a", a), write(tmp_path / "b", b)
    other = write(tmp_path / "other", result("paper-dp-scaling-1m", "ulysses"))
    assert "scenario.workload" in bad(tmp_path, capsys, str(ra), str(other))
    wider = write(tmp_path / "wider", result("paper-dp-scaling-256k", "ulysses",
                                             "parallelism.gbs=4"))
    assert "scenario.parallelism" in bad(tmp_path, capsys, str(ra), str(wider))
    moe = json.loads((ROOT / "tests" / "golden" / "moe-glm45.json").read_text())
    assert "training" in bad(tmp_path, capsys, str(ra), str(write(tmp_path / "moe", moe)))
    assert "--components" in bad(tmp_path, capsys, str(ra), str(rb), "--components", "nope")
    (tmp_path / "broken.json").write_text("{not json")
    bad(tmp_path, capsys, str(ra), str(tmp_path / "broken.json"))
    assert "RESULT_B" in bad(tmp_path, capsys, str(ra), str(tmp_path / "missing"))
    old = {k: v for k, v in a.items() if k != "attribution"}
    assert "attribution" in bad(tmp_path, capsys, str(write(tmp_path / "old", old)), str(rb))
    with pytest.raises(InputError):
        explain(ra, rb, ["balanced_work", "nope"])


def test_the_report_pairs_the_fastest_run_with_each_other_run() -> None:
    stem = "paper-pp-microbatch-256k"
    runs = {pol: result(stem, pol) for pol in SYSTEMS}
    fastest = min(runs, key=lambda p: runs[p]["step_time_s"]["mean"])
    runs["elsewhere"] = result("paper-dp-scaling-1m", "ulysses")  # another cluster: left out
    found = explain_runs(runs)
    assert [(e.a, e.b) for e in found] == [(fastest, p) for p in SYSTEMS if p != fastest]
    assert all(e.adds_up for e in found)


def test_the_report_page_shows_the_split(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from libra_des.api.reports import drawer, render

    a, b = dp_pair()
    write(tmp_path / "runs" / "libra", a)
    write(tmp_path / "runs" / "ulysses", b)
    page = render(tmp_path / "runs", None, drawer())
    assert "Why one run beats another" in page
    assert "libra against ulysses: step time" not in page  # titles live inside the PNG
    assert "Why libra&#x27;s step time differs from ulysses&#x27;s" in page
